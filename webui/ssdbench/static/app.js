/* Page glue: fetch the JSON the page needs, then hand it to the report, or follow a live run.
 * The page says what it is in <body data-page=...>. */
(function () {
  "use strict";

  const POLL_MS = 500; // the runner writes progress twice a second
  const REPEAT_POLL_MS = 2000; // a repeat set changes only as its runs start and end
  const ACTIVE = ["queued", "running"];
  const body = document.body;

  async function getJSON(url) {
    const response = await fetch(url, {credentials: "same-origin", headers: {Accept: "application/json"}});
    if (!response.ok) throw new Error(`${url}: HTTP ${response.status}`);
    return response.json();
  }

  function fail(container, error) {
    const p = document.createElement("p");
    p.className = "error";
    p.textContent = `The report could not be drawn: ${error.message}`;
    container.replaceChildren(p);
  }

  const CLOCK_STEPS = [1, 2, 5, 10, 15, 30, 60, 120, 300, 600, 900, 1800, 3600, 7200, 14400, 28800, 86400];

  // A live chart on the seconds since the run started, in the theme's `series`th colour; a note stands in it until
  // its first sample comes.
  function liveChart(parent, label, unit, series, range) {
    const box = document.createElement("figure");
    box.className = "chart live";
    const waiting = document.createElement("p");
    waiting.className = "note waiting";
    waiting.textContent = `${label}: waiting for the first sample`;
    box.append(waiting);
    parent.append(box);
    const t = SsdbenchReport.theme();
    const opts = {
      width: Math.max(300, Math.min(1100, parent.clientWidth || 900)), height: 160,
      scales: {x: {time: false}, y: range ? {range} : {}},
      series: [{label: "elapsed", value: (u, v) => (v === null ? "–" : SsdbenchReport.clock(v))},
               {label, stroke: t.colors[series], width: 1.5, spanGaps: true,
                value: (u, v) => (v === null ? "–" : SsdbenchReport.num(v))}],
      // whole seconds only between the ticks, or two ticks half a second apart would read the same
      axes: [{...t.axis, label: "elapsed (h:mm:ss)", incrs: CLOCK_STEPS,
              values: (u, splits) => splits.map((v) => SsdbenchReport.clock(v))},
             {...t.axis, label: unit, size: 70, values: (u, splits) => splits.map((v) => SsdbenchReport.num(v))}],
    };
    const u = new uPlot(opts, [[], []], box);
    return {
      u,
      set(xs, ys) {
        if (ys.some((v) => v !== null)) waiting.remove();
        u.setData([xs, ys]);
      },
    };
  }

  // A temperature's scale: its own range with a degree either side, not from zero, so that a change shows.
  function fitted(u, min, max) {
    return min === null ? [20, 60] : [Math.floor(min) - 1, Math.ceil(max) + 1];
  }

  function live(runId) {
    const $ = (id) => document.getElementById(id);
    const parent = $("live-charts");
    const charts = [liveChart(parent, "IOPS", "IOPS", 0), liveChart(parent, "MB/s", "MB/s", 1),
                    liveChart(parent, "Temperature", "°C", 2, fitted)];
    // The charts' history: the runner's samples since the run started (a reload draws them all again), then
    // each new one as the page follows the run.
    const samples = {t: [], iops: [], mb_s: []};
    const temps = {t: [], value: []};
    let lastAt = null;
    let lastTempAt = null;
    let most = 0; // the percent never goes back, whatever a poll says
    // what the page has drawn, for the browser tests to read as a tester sees it
    window.SsdbenchLive = {charts: charts.map((c) => c.u), samples, temps};

    function draw() {
      charts[0].set(samples.t, samples.iops);
      charts[1].set(samples.t, samples.mb_s);
      charts[2].set(temps.t, temps.value);
    }

    function doing(p) {
      const now = p.step_index === null ? null : p.steps[p.step_index];
      if (now) return `Step ${p.step_index + 1} of ${p.step_count}: ${now.title}`;
      if (p.state === "queued") return `Queued: waiting for the runner service, before step 1 of ${p.step_count}`;
      if (p.state === "running") {
        return `Preparing the PC and calibrating the host (what this PC costs each IO), before step 1 of ${p.step_count}`;
      }
      return `Step – of ${p.step_count}`;
    }

    function show(p) {
      most = Math.max(most, p.percent);
      const percent = Math.floor(most);
      $("progress-bar").value = most;
      $("percent").textContent = `${percent} %`;
      document.title = `${percent} % · Run ${runId}`;
      $("step-now").textContent = doing(p);
      $("eta").textContent = SsdbenchReport.clock(p.eta_s);
      $("finish").textContent = p.eta_s === null ? "–"
        : new Date(Date.now() + p.eta_s * 1000).toLocaleTimeString([], {hour: "2-digit", minute: "2-digit"});
      $("state").textContent = p.state;
      $("state").className = `badge state-${p.state}`;
      $("live-iops").textContent = p.cur_iops === null ? "–" : SsdbenchReport.num(p.cur_iops);
      $("live-mb-s").textContent = p.cur_bw === null ? "–" : SsdbenchReport.num(p.cur_bw / 1e6);
      $("temperature").textContent = p.temperature ? Math.round(p.temperature.value) : "–";
      $("status").textContent = p.cancel_requested && ACTIVE.includes(p.state) ? "Cancel requested: stopping fio cleanly…"
        : "";
      for (const step of p.steps) {
        const item = document.querySelector(`#steps li[data-idx="${step.idx}"]`);
        item.className = `state-${step.state}` + (step.state === "running" ? " current" : "");
        item.querySelector(".badge").textContent = step.state;
      }
      if (p.state !== "running" || p.started_at === null) return;
      let drawn = false;
      // in whole ms, as the runner keeps its samples: the history's last is not drawn twice
      const at = p.progress_at === null ? null : Math.trunc((p.progress_at - p.started_at) * 1000) / 1000;
      if (at !== null && (lastAt === null || at > lastAt)) {
        lastAt = at;
        samples.t.push(at);
        samples.iops.push(p.cur_iops);
        samples.mb_s.push(p.cur_bw === null ? null : p.cur_bw / 1e6);
        drawn = true;
      }
      if (p.temperature && (lastTempAt === null || p.temperature.t_ms / 1000 > lastTempAt)) {
        lastTempAt = p.temperature.t_ms / 1000;
        temps.t.push(lastTempAt);
        temps.value.push(p.temperature.value);
        drawn = true;
      }
      if (drawn) draw();
    }

    async function history() {
      try {
        const h = await getJSON(`/api/runs/${runId}/live`);
        // taken whole, never spread into push(): a long run keeps more samples than a call takes arguments
        Object.assign(samples, {t: h.t_s, iops: h.iops, mb_s: h.bw.map((v) => (v === null ? null : v / 1e6))});
        Object.assign(temps, {t: h.temperature.t_s, value: h.temperature.value});
        lastAt = h.t_s.length ? h.t_s[h.t_s.length - 1] : null;
        lastTempAt = h.temperature.t_s.length ? h.temperature.t_s[h.temperature.t_s.length - 1] : null;
        draw();
      } catch (error) {
        // the charts start from now instead: the progress itself does not need the history
      }
    }

    async function tick() {
      try {
        const p = await getJSON(`/api/runs/${runId}/progress`);
        show(p);
        if (!ACTIVE.includes(p.state)) {
          setTimeout(() => window.location.reload(), 1500); // the same page now shows the report
          return;
        }
      } catch (error) {
        $("status").textContent = `Lost contact with the appliance, retrying: ${error.message}`;
      }
      setTimeout(tick, POLL_MS);
    }
    history().then(tick);
  }

  // The drive list while a run goes on: its drive's line follows the run, and the page is drawn again as it ends,
  // so that every Start is offered again.
  function followOnDrives(runId) {
    const row = document.querySelector("details.drive.running .row-progress");
    async function tick() {
      try {
        const p = await getJSON(`/api/runs/${runId}/progress`);
        if (!ACTIVE.includes(p.state)) {
          window.location.reload();
          return;
        }
        if (row) {
          row.querySelector("progress").value = p.percent;
          row.querySelector(".percent").textContent = `${Math.floor(p.percent)} %`;
          const now = p.step_index === null ? null : p.steps[p.step_index];
          row.querySelector(".step").textContent = now ? `step ${p.step_index + 1} of ${p.step_count}: ${now.title}` : "";
        }
      } catch (error) {
        // the next tick tries again: the list itself stays as it was drawn
      }
      setTimeout(tick, REPEAT_POLL_MS);
    }
    tick();
  }

  // A repeat set while it runs: the page is drawn by the server, so it is drawn again when a run of the set
  // starts or ends, or the set ends: when the API's states differ from those the page was drawn with.
  function followRepeat(repeatId, shown) {
    const status = document.getElementById("status");
    async function tick() {
      try {
        const set = await getJSON(`/api/repeats/${repeatId}`);
        if (JSON.stringify([set.state, set.runs.map((r) => [r.id, r.state])]) !== shown) {
          window.location.reload();
          return;
        }
      } catch (error) {
        status.textContent = `Lost contact with the appliance, retrying: ${error.message}`;
      }
      setTimeout(tick, REPEAT_POLL_MS);
    }
    tick();
  }

  // The bench: a click on a column's name sorts the drives by it, best first (as the column says which way is
  // better), again the other way; a drive with no value for the column goes last either way.
  function sortable(table) {
    const heads = [...table.querySelectorAll("thead th")];
    heads.forEach((th, col) => {
      const button = th.querySelector("button");
      if (!button) return;
      button.addEventListener("click", () => {
        const kind = th.dataset.sort;
        const now = th.getAttribute("aria-sort");
        const dir = now === "descending" ? "ascending" : now === "ascending" ? "descending"
          : kind === "higher" ? "descending" : "ascending";
        heads.forEach((h) => h.removeAttribute("aria-sort"));
        th.setAttribute("aria-sort", dir);
        const sign = dir === "ascending" ? 1 : -1;
        const rows = [...table.tBodies[0].rows];
        const value = (row) => row.cells[col].dataset.value;
        rows.sort((a, b) => {
          const [va, vb] = [value(a), value(b)];
          if (va === "" || vb === "") return (va === "") - (vb === "");
          return sign * (kind === "text" ? va.localeCompare(vb) : Number(va) - Number(vb));
        });
        table.tBodies[0].append(...rows);
      });
    });
  }

  const page = body.dataset.page;
  if (page === "drives" && body.dataset.run) {
    followOnDrives(body.dataset.run);
  } else if (page === "live") {
    live(body.dataset.run);
  } else if (page === "report") {
    const container = document.getElementById("report");
    getJSON(`/api/runs/${body.dataset.run}`).then((doc) => SsdbenchReport.draw(container, doc))
      .catch((error) => fail(container, error));
  } else if (page === "repeat-live") {
    followRepeat(body.dataset.repeat, body.dataset.shown);
  } else if (page === "bench") {
    document.querySelectorAll("table.sortable").forEach(sortable);
  } else if (page === "compare") {
    const container = document.getElementById("compare");
    const query = body.dataset.runs.split(",").map((id) => `run=${encodeURIComponent(id)}`).join("&");
    getJSON(`/api/compare?${query}`).then((result) => SsdbenchReport.compare(container, result.runs))
      .catch((error) => fail(container, error));
  }
})();
