// clustersim web app: keeps a scenario, sends it to the server after every change, and swaps in
// the sections and charts the server renders (the same as `clustersim run --html`).
// document.body.dataset.updates counts the answers shown; dataset.timelines the timelines.
(function () {
  "use strict";
  var cfg = JSON.parse(document.getElementById("clustersim-app").textContent);
  var base = null;          // the scenario the controls start from (a mapping, as in a YAML file)
  var seq = 0;              // the newest change; older answers are dropped
  var views = {};           // chart id -> Bokeh ViewManager, removed before a chart is replaced
  var timer = null;
  var updates = 0, timelines = 0;
  var yamlEdited = false;   // the YAML box follows the controls until the user types in it
  // Controls the user has changed since the scenario was loaded: only these are written over it,
  // so a value the sliders cannot show (micro-batch 3, PP 256), a schedule or recompute option,
  // or a cluster of node groups goes to the server as the scenario states it.
  var touched = {};
  var $ = function (id) { return document.getElementById(id); };

  function clone(x) { return JSON.parse(JSON.stringify(x)); }
  function section(name) { var p = base[name]; return (p && typeof p === "object") ? p : {}; }
  function log2(x) { return Math.max(0, Math.round(Math.log2(Math.max(1, Number(x) || 1)))); }
  // a cluster of node groups (cluster.groups): its first group's hardware, every group's nodes
  function group0(c) { return (Array.isArray(c.groups) && c.groups.length && c.groups[0]) || null; }
  function groupNodes(c) {
    return Array.isArray(c.groups) ? c.groups.reduce(function (n, g) { return n + (Number(g && g.nodes) || 0); }, 0) : 0;
  }

  function showError(message) {
    var el = $("error");
    el.textContent = "error: " + message;
    el.style.display = "block";
    document.body.dataset.error = "true";
    document.body.classList.add("stale");  // what is still shown is the last valid layout
  }
  function clearError() {
    $("error").style.display = "none";
    $("error").textContent = "";
    document.body.dataset.error = "false";
    document.body.classList.remove("stale");
  }
  function status(text) { $("status").textContent = text; }

  // GPUs of the cluster the controls describe, and of one scale-up domain (NVLink / xGMI): the
  // scenario's own overrides while its preset is kept, else the chosen preset's (cfg.clusters).
  function shape() {
    var c = section("cluster"), own = !$("cluster").value, g0 = group0(c);
    var preset = $("cluster").value || c.preset || (own && g0 && g0.preset) || cfg.default_cluster;
    var s = cfg.clusters[preset] || { gpus_per_node: 8, scale_up_domain: 8 };
    var gpn = Number((own && (c.gpus_per_node || (g0 && g0.gpus_per_node))) || s.gpus_per_node);
    var domain = Number((own && c.scale_up_domain) || s.scale_up_domain || gpn);
    var gpus = Math.max(1, Number($("nodes").value) || 1) * gpn;
    return { gpus: gpus, domain: Math.min(domain, gpus) };
  }

  // The sliders reach only layouts the cluster can hold: TP within one scale-up domain, PP, CP,
  // EP and DP within the cluster's GPUs (a range input clamps its value to a lowered max).
  function bound() {
    var s = shape();
    var lg = function (n) { return Math.floor(Math.log2(Math.max(1, n))); };
    var pow = function (id, n, what) {
      $(id).max = String(lg(n));
      $(id).title = "powers of two, 1 to " + Math.pow(2, lg(n)) + " (" + what + ")";
    };
    pow("tp", s.domain, "the GPUs of one scale-up domain");
    pow("cp", s.gpus, "the cluster's GPUs");
    pow("ep", s.gpus, "the cluster's GPUs");
    pow("dp", s.gpus, "the cluster's GPUs");
    $("pp").max = String(Math.min(128, s.gpus));
    $("pp").title = "1 to " + $("pp").max + " stages (at most the cluster's GPUs)";
    document.body.dataset.gpus = String(s.gpus);
  }

  // What a slider stands for: the scenario's own value until the user moves it.
  var FIELD = { tp: "tp", pp: "pp", cp: "cp", ep: "ep", dp: "dp", mb: "micro_batch" };
  function shown(id, value) {
    var own = section("parallel")[FIELD[id]];
    return (!touched[id] && own !== undefined) ? String(own) : value;
  }
  function labels() {
    bound();
    $("tp-out").textContent = shown("tp", String(Math.pow(2, Number($("tp").value))));
    $("pp-out").textContent = shown("pp", $("pp").value);
    $("cp-out").textContent = shown("cp", String(Math.pow(2, Number($("cp").value))));
    $("ep-out").textContent = shown("ep", String(Math.pow(2, Number($("ep").value))));
    $("dp-out").textContent = $("dp-auto").checked ? "auto" : String(Math.pow(2, Number($("dp").value)));
    $("mb-out").textContent = shown("mb", String(Math.pow(2, Number($("mb").value))));
    $("dp").disabled = $("dp-auto").checked;
  }

  function fill(sc) {
    base = clone(sc);
    touched = {};
    var c = section("cluster"), p = section("parallel");
    $("model").value = "";
    $("cluster").value = "";
    $("framework").value = "";
    $("nodes").value = c.nodes || groupNodes(c) || 1;
    bound();
    $("tp").value = log2(p.tp || 1);
    $("pp").value = p.pp || 1;
    $("cp").value = log2(p.cp || 1);
    $("ep").value = log2(p.ep || 1);
    $("dp-auto").checked = true;  // a what-if keeps the GPU count: DP takes what TP x PP x CP leave
    $("dp").value = log2(p.dp || 1);
    $("mb").value = log2(p.micro_batch || 1);
    $("global_batch").value = p.global_batch || "";
    $("schedule").value = p.schedule || "1f1b";
    $("virtual_stages").value = p.virtual_stages || 1;
    $("zero_stage").value = String(p.zero_stage === undefined ? 0 : p.zero_stage);
    $("recompute").value = p.recompute || "none";
    $("sequence_parallel").checked = !!p.sequence_parallel;
    $("save-name").value = "scenario";
    labels();
  }

  // The scenario the controls describe: the base with the fields of the changed controls written
  // over it (``touched``); DP follows the rule of its checkbox once the GPUs or the degrees change.
  function current() {
    var sc = clone(base);
    var t = touched;
    if ($("model").value) { sc.model = { preset: $("model").value }; }
    sc.cluster = (sc.cluster && typeof sc.cluster === "object") ? sc.cluster : {};
    if ($("cluster").value) { sc.cluster = { preset: $("cluster").value }; }
    if ($("framework").value) { sc.framework = $("framework").value; }
    if ((t.nodes || t.cluster) && Array.isArray(sc.cluster.groups)) {
      // a new node count ends the node groups (docs/html.md): the first group's preset, that many nodes
      var g0 = group0(sc.cluster) || {};
      sc.cluster = { preset: sc.cluster.preset || g0.preset };
    }
    if (t.nodes || t.cluster) { sc.cluster.nodes = $("nodes").value === "" ? $("nodes").value : Number($("nodes").value); }
    var p = (sc.parallel && typeof sc.parallel === "object") ? sc.parallel : {};
    if (t.tp) { p.tp = Math.pow(2, Number($("tp").value)); }
    if (t.pp) { p.pp = Number($("pp").value); }
    if (t.cp) { p.cp = Math.pow(2, Number($("cp").value)); }
    if (t.ep) { p.ep = Math.pow(2, Number($("ep").value)); }
    if (t.tp || t.pp || t.cp || t.dp || t["dp-auto"] || t.nodes || t.cluster) {
      if ($("dp-auto").checked) { delete p.dp; } else { p.dp = Math.pow(2, Number($("dp").value)); }
    }
    if (t.mb) { p.micro_batch = Math.pow(2, Number($("mb").value)); }
    if (t.global_batch) {
      if ($("global_batch").value === "") { delete p.global_batch; } else { p.global_batch = Number($("global_batch").value); }
    }
    if (t.schedule) { p.schedule = $("schedule").value; }
    if (t.virtual_stages) {
      p.virtual_stages = $("virtual_stages").value === "" ? $("virtual_stages").value : Number($("virtual_stages").value);
    }
    if (t.zero_stage) { p.zero_stage = Number($("zero_stage").value); }
    if (t.recompute) { p.recompute = $("recompute").value; }
    if (t.sequence_parallel) { p.sequence_parallel = $("sequence_parallel").checked; }
    sc.parallel = p;
    return sc;
  }

  function engine() { return $("engine-event").checked ? "event" : "analytical"; }

  function post(url, body) {
    return fetch(url, { method: "POST", headers: { "Content-Type": "application/json" }, body: JSON.stringify(body) })
      .then(function (r) {
        return r.text().then(function (text) {
          var data = null;
          try { data = JSON.parse(text); } catch (e) { data = null; }
          if (!r.ok) { throw new Error((data && data.error) || ("HTTP " + r.status + " " + text.slice(0, 200))); }
          return data;
        });
      });
  }

  function embed(charts) {
    var jobs = Object.keys(charts).map(function (id) {
      var el = $(id);
      if (!el) { return Promise.resolve(); }
      if (views[id]) { views[id].roots.forEach(function (v) { v.remove(); }); delete views[id]; }
      el.innerHTML = "";
      return Bokeh.embed.embed_item(charts[id], id).then(function (vm) { views[id] = vm; });
    });
    return Promise.all(jobs);
  }

  function show(res, only) {
    Object.keys(res.sections).forEach(function (name) {
      if (only && name !== only) { return; }
      var el = $("body-" + name);
      if (el) {
        if (views["chart-" + name]) {
          views["chart-" + name].roots.forEach(function (v) { v.remove(); });
          delete views["chart-" + name];
        }
        el.innerHTML = res.sections[name];
      }
    });
    if (!only) {
      document.querySelectorAll("section[data-optional]").forEach(function (sec) {
        sec.hidden = !(sec.id.slice(4) in res.sections);
      });
    }
    var charts = {};
    Object.keys(res.charts).forEach(function (id) { if (!only || id === "chart-" + only) { charts[id] = res.charts[id]; } });
    return embed(charts);
  }

  function update() {
    var my = ++seq;
    var sc = current();
    var eng = engine();
    status(eng === "event" ? "event engine running..." : "closed form running...");
    var t0 = performance.now();
    post("/api/predict", { scenario: sc, engine: eng, timeline: eng === "event" })
      .then(function (res) {
        if (my !== seq) { return null; }
        clearError();
        var ms = Math.round(performance.now() - t0);
        var dp = res.report.parallel.dp;
        if (!yamlEdited) { $("yaml").value = res.yaml; }
        if ($("dp-auto").checked) { $("dp-out").textContent = "auto (" + dp + ")"; }
        return show(res).then(function () {
          updates += 1;
          document.body.dataset.updates = String(updates);
          document.body.dataset.stepTime = String(res.report.step_time_s);
          status((eng === "event" ? "event engine" : "closed form") + " answered in " + ms + " ms");
          if (eng === "event") { timelines += 1; document.body.dataset.timelines = String(timelines); return null; }
          $("body-timeline").innerHTML = '<p class="note">the event engine is drawing the timeline...</p>';
          return post("/api/predict", { scenario: sc, engine: "event", timeline: true }).then(function (ev) {
            if (my !== seq) { return null; }
            return show(ev, "timeline").then(function () {
              timelines += 1;
              document.body.dataset.timelines = String(timelines);
              status("closed form answered in " + ms + " ms; timeline from the event engine (step " +
                     ev.report.step_time_s.toPrecision(4) + " s) after " + Math.round(performance.now() - t0) + " ms");
            });
          }, function (err) {
            // The closed form's answer stands; only the timeline is missing, and the page says why.
            if (my !== seq) { return; }
            var note = document.createElement("p");
            note.className = "note bad";
            note.textContent = "no timeline: " + err.message;
            $("body-timeline").innerHTML = "";
            $("body-timeline").appendChild(note);
            status("closed form answered in " + ms + " ms");
          });
        });
      })
      .catch(function (err) {
        if (my !== seq) { return; }
        status("the sections below still show the last valid layout");
        showError(err.message);
        console.warn("clustersim: " + err.message);
      });
  }

  function later() {
    labels();
    if (timer) { clearTimeout(timer); }
    timer = setTimeout(update, 120);
  }

  function download() {
    post("/api/scenario.yaml", { scenario: current() }).then(function (res) {
      clearError();
      var url = URL.createObjectURL(new Blob([res.yaml], { type: "application/x-yaml" }));
      var a = document.createElement("a");
      a.href = url;
      a.download = res.filename;
      document.body.appendChild(a);
      a.click();
      a.remove();
      setTimeout(function () { URL.revokeObjectURL(url); }, 1000);
    }).catch(function (err) { showError(err.message); });
  }

  function save() {
    post("/api/save", { scenario: current(), name: $("save-name").value }).then(function (res) {
      clearError();
      $("saved").textContent = "saved in the output folder: " + res.saved.join(", ");
    }).catch(function (err) { showError(err.message); });
  }

  function applyYaml() {
    post("/api/parse-yaml", { yaml: $("yaml").value }).then(function (res) {
      clearError();
      yamlEdited = false;
      fill(res.scenario);
      update();
    }).catch(function (err) { showError(err.message); });
  }

  function start(name) {
    fill(cfg.scenarios[name]);
    yamlEdited = false;
    update();
  }

  function changed(id) { return function () { touched[id] = true; later(); }; }
  ["tp", "pp", "cp", "ep", "dp", "mb"].forEach(function (id) { $(id).addEventListener("input", changed(id)); });
  ["nodes", "global_batch", "virtual_stages"].forEach(function (id) { $(id).addEventListener("change", changed(id)); });
  ["model", "cluster", "framework", "schedule", "zero_stage", "recompute", "sequence_parallel", "dp-auto",
   "engine-analytical", "engine-event"].forEach(function (id) { $(id).addEventListener("change", changed(id)); });
  $("start").addEventListener("change", function () { start($("start").value); });
  $("download").addEventListener("click", download);
  $("save").addEventListener("click", save);
  $("apply-yaml").addEventListener("click", applyYaml);
  $("yaml").addEventListener("input", function () { yamlEdited = true; });
  document.body.dataset.updates = "0";
  document.body.dataset.timelines = "0";
  if (cfg.start !== null) { start(cfg.start); }
})();
