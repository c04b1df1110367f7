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

  function liveChart(parent, label, unit, color) {
    const box = document.createElement("figure");
    box.className = "chart live";
    parent.append(box);
    const opts = {
      width: Math.max(300, Math.min(1100, parent.clientWidth || 900)), height: 160,
      series: [{}, {label, stroke: color, width: 1.5, spanGaps: true,
                    value: (u, v) => (v === null ? "–" : SsdbenchReport.num(v))}],
      axes: [{}, {label: unit, size: 70, values: (u, splits) => splits.map((v) => SsdbenchReport.num(v))}],
    };
    return new uPlot(opts, [[], []], box);
  }

  function live(runId) {
    const $ = (id) => document.getElementById(id);
    const parent = $("live-charts");
    const charts = [liveChart(parent, "IOPS", "IOPS", "#1f77b4"), liveChart(parent, "MB/s", "MB/s", "#d62728"),
                    liveChart(parent, "temperature", "°C", "#2ca02c")];
    const samples = {t: [], iops: [], mb_s: [], temp: []};
    let lastAt = null;

    function show(p) {
      $("progress-bar").value = p.percent;
      $("percent").textContent = `${p.percent.toFixed(1)}%`;
      $("eta").textContent = SsdbenchReport.clock(p.eta_s);
      $("state").textContent = p.state;
      $("state").className = `badge state-${p.state}`;
      $("rate").textContent = p.cur_iops === null ? "" :
        `${SsdbenchReport.num(p.cur_iops, 0)} IOPS, ${SsdbenchReport.num(p.cur_bw / 1e6, 1)} MB/s`;
      $("temperature").textContent = p.temperature ? `${p.temperature.value} °C` : "";
      $("status").textContent = p.state === "queued" ? "Queued: waiting for the runner service (ssdbench runner)."
        : p.cancel_requested && ACTIVE.includes(p.state) ? "Cancel requested: stopping fio cleanly…" : "";
      for (const step of p.steps) {
        const item = document.querySelector(`#steps li[data-idx="${step.idx}"]`);
        item.className = `state-${step.state}` + (step.state === "running" ? " current" : "");
        item.querySelector(".badge").textContent = step.state;
      }
      if (p.state === "running" && p.progress_at !== null && p.progress_at !== lastAt) {
        lastAt = p.progress_at;
        samples.t.push(p.progress_at);
        samples.iops.push(p.cur_iops);
        samples.mb_s.push(p.cur_bw === null ? null : p.cur_bw / 1e6);
        samples.temp.push(p.temperature ? p.temperature.value : null);
        charts[0].setData([samples.t, samples.iops]);
        charts[1].setData([samples.t, samples.mb_s]);
        charts[2].setData([samples.t, samples.temp]);
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

  const page = body.dataset.page;
  if (page === "live") {
    live(body.dataset.run);
  } else if (page === "report") {
    const container = document.getElementById("report");
    getJSON(`/api/runs/${body.dataset.run}`).then((doc) => SsdbenchReport.draw(container, doc))
      .catch((error) => fail(container, error));
  } else if (page === "repeat-live") {
    followRepeat(body.dataset.repeat, body.dataset.shown);
  } else if (page === "compare") {
    const container = document.getElementById("compare");
    const query = body.dataset.runs.split(",").map((id) => `run=${encodeURIComponent(id)}`).join("&");
    getJSON(`/api/compare?${query}`).then((result) => SsdbenchReport.compare(container, result.runs))
      .catch((error) => fail(container, error));
  }
})();
