/* The ssdbench report: draws a run's report from its JSON document (GET /api/runs/<id>),
 * or several runs overlaid, with uPlot.
 *
 * It does no fetching: the page, or an offline report.html with the document inlined,
 * passes the data in. Every string that comes from the data (drive model, step titles,
 * series names) goes in as text (textContent, attributes, canvas text), never as markup.
 *
 *   SsdbenchReport.draw(container, doc)        one run
 *   SsdbenchReport.compare(container, docs)    2 to 10 runs, charts overlaid
 *   SsdbenchReport.charts                      the uPlot instances drawn so far
 *
 * Each section is a <details> that folds (the summary above them is the page's, drawn by the server); every
 * chart names its fio version and suite hash in small print and can be saved as PNG and SVG (export.js).
 */
(function (global) {
  "use strict";

  const PERCENTILES = ["50", "90", "99", "99.9", "99.99"];
  const STEADY_FROM_S = 1400; // runs before the judged window was recorded: methodology 5's t >= 1400 s
  // The charts' colours in each theme: uPlot draws on a canvas, which the style sheet does not reach. The series
  // are Category10's hues, each at 3:1 or more against its theme's ground (WCAG's contrast for graphics), the
  // axes' text at 4.5:1 or more; the theme is the system's when the chart is drawn.
  const THEMES = {
    light: {ground: "#fafafa", ink: "#1b1b1b", faint: "rgba(0, 0, 0, 0.35)", grid: "rgba(0, 0, 0, 0.07)",
            colors: ["#1f77b4", "#d62728", "#2ca02c", "#c25e00", "#9467bd", "#8c564b", "#b8459a", "#11808b",
                     "#6e6e6e", "#7a7b00"]},
    dark: {ground: "#14181c", ink: "#e2e4e6", faint: "rgba(255, 255, 255, 0.4)", grid: "rgba(255, 255, 255, 0.12)",
           colors: ["#6cb6ff", "#ff7b72", "#56d364", "#ffa657", "#d2a8ff", "#d9a38b", "#f778ba", "#39d0e0",
                    "#b0b7bf", "#d4d44c"]},
  };

  function theme() {
    const t = global.matchMedia("(prefers-color-scheme: dark)").matches ? THEMES.dark : THEMES.light;
    return {...t, axis: {stroke: t.ink, grid: {stroke: t.grid}, ticks: {stroke: t.grid}}};
  }
  const charts = [];

  // --- DOM and number formatting ---------------------------------------------------------------

  function el(tag, attrs, ...children) {
    const node = document.createElement(tag);
    for (const [key, value] of Object.entries(attrs || {})) {
      if (key === "class") node.className = value;
      else node.setAttribute(key, value);
    }
    for (const child of children) {
      if (child !== null && child !== undefined) node.append(child); // a string becomes a text node
    }
    return node;
  }

  // Four significant digits, whole above 1000, as human.figure() shows them on the server: "502.7" in both.
  function num(v, digits) {
    if (v === null || v === undefined || Number.isNaN(v)) return "–";
    const abs = Math.abs(v);
    const d = digits !== undefined ? digits : abs >= 1000 || abs === 0 ? 0 : Math.max(0, 3 - Math.floor(Math.log10(abs)));
    return v.toLocaleString("en-US", {minimumFractionDigits: 0, maximumFractionDigits: d});
  }

  // Busy and service times in ms wherever they are shown, as human.quantity() shows the figures on the server.
  const IN_MS = /(busy|service)_s$/;

  // A value in a unit people read easily; the exact value stays in the cell's tooltip.
  function human(value, unit, name) {
    if (unit === "s" && (IN_MS.test(name || "") || (value > 0 && value < 1))) return num(value * 1e3) + " ms";
    if (unit === "ns") {
      if (Math.abs(value) >= 1e6) return num(value / 1e6) + " ms";
      if (Math.abs(value) >= 1e3) return num(value / 1e3) + " µs";
    }
    if (unit === "B" || unit === "B/s") {
      const suffix = unit === "B" ? "" : "/s";
      if (Math.abs(value) >= 1e9) return num(value / 1e9) + " GB" + suffix;
      if (Math.abs(value) >= 1e6) return num(value / 1e6) + " MB" + suffix;
    }
    return num(value) + " " + unit;
  }

  function bytes(v) {
    const units = [[2 ** 30, "GiB"], [2 ** 20, "MiB"], [2 ** 10, "KiB"]];
    for (const [size, name] of units) if (v >= size) return num(v / size) + " " + name;
    return num(v) + " B";
  }

  function clock(seconds) {
    if (seconds === null || seconds === undefined) return "–";
    const s = Math.round(seconds);
    return `${Math.floor(s / 3600)}:${String(Math.floor(s / 60) % 60).padStart(2, "0")}:${String(s % 60).padStart(2, "0")}`;
  }

  function metricCell(m) {
    return el("td", {class: "num", title: `${m.name} = ${m.value} ${m.unit}\nsource: ${m.source}`},
              human(m.value, m.unit, m.name));
  }

  // A column of latencies (ns) in one unit, the one its largest value reads best in: never "886 µs" above
  // "1.027 ms". [divisor, unit]
  function latencyUnit(values) {
    const top = values.reduce((a, v) => Math.max(a, Math.abs(v)), 0);
    return top >= 1e9 ? [1e9, "s"] : top >= 1e6 ? [1e6, "ms"] : top >= 1e3 ? [1e3, "µs"] : [1, "ns"];
  }

  function latencyCell(m, [divisor, unit]) {
    if (m.unit !== "ns") return metricCell(m);
    return el("td", {class: "num", title: `${m.name} = ${m.value} ${m.unit}\nsource: ${m.source}`},
              `${num(m.value / divisor)} ${unit}`);
  }

  // An axis in µs that runs past 10,000 is read in ms, past 10,000,000 in s: a latency axis up to "1,000 ms",
  // not "1,000,000 µs". The chart's lines, markers, title and axis label go over together.
  const LARGER = [[1e7, 1e6, "s"], [1e4, 1e3, "ms"]];

  function fittedUnits(spec) {
    const top = (values) => values.reduce((a, v) => (v === null || v === undefined ? a : Math.max(a, Math.abs(v))), 0);
    const over = (values) => LARGER.find(([from]) => top(values) >= from);
    let out = spec;
    const yHit = /µs/.test(spec.yAxis.label) && !spec.histogram ? over(spec.lines.flatMap((l) => l.y)) : null;
    if (yHit) {
      const [, by, unit] = yHit;
      out = {...out, title: out.title.replace("µs", unit), yAxis: {...out.yAxis, label: out.yAxis.label.replace("µs", unit)},
             lines: out.lines.map((l) => ({...l, unit, y: l.y.map((v) => (v === null || v === undefined ? v : v / by))}))};
    }
    const xHit = /µs/.test(spec.xAxis.label) ? over(spec.lines.flatMap((l) => l.x)) : null;
    if (xHit) {
      const [, by, unit] = xHit;
      out = {...out, xAxis: {...out.xAxis, label: out.xAxis.label.replace("µs", unit)},
             lines: out.lines.map((l) => ({...l, x: l.x.map((v) => v / by)})),
             markers: (out.markers || []).map((m) => ({...m, at: m.at / by}))};
    }
    return out;
  }

  // --- reading the document --------------------------------------------------------------------

  function metricMap(step) {
    const out = {};
    for (const m of step.metrics || []) out[m.name] = m;
    return out;
  }

  function stepSeries(doc, step) {
    return doc.series.filter((s) => s.step_id === step.id);
  }

  // A series in the units the charts use: seconds, GB of offset, MB/s, µs.
  function display(series) {
    const xScale = {ms: 1 / 1000, offset: 1 / 1e9, bytes: 1, ns: 1 / 1000}[series.x_unit] || 1;
    let yScale = 1;
    let unit = series.unit;
    if (unit === "KiB/s") { yScale = 1024 / 1e6; unit = "MB/s"; }
    else if (unit === "ns") { yScale = 1 / 1000; unit = "µs"; }
    return {x: series.x.map((v) => v * xScale), y: series.y.map((v) => v * yScale), unit};
  }

  const X_AXES = {
    ms: {kind: "time", label: "time (s)"},
    offset: {kind: "offset", label: "zone offset (GB)"},
    bytes: {kind: "bytes", label: "transfer size (bytes)", log: true},
    ns: {kind: "number", label: "latency (µs)", log: true},
  };

  function xAxis(xUnit) {
    return X_AXES[xUnit] || {kind: "number", label: xUnit};
  }

  function line(label, series) {
    const d = display(series);
    return {label, x: d.x, y: d.y, unit: d.unit};
  }

  // A series' name in the tester's words: "read.qd1.mb_s" is "Read, QD1", "write.clat" "Write, completion
  // latency"; the unit is the axis's, so it is left out. A part the words do not know stays as it is.
  // A matrix job's name says its direction, queue depth, block size and mix: "read.qd1.bs4k" is "Read, QD1, 4K".
  const WORDS = {read: "Read", write: "Write", trim: "TRIM", lat: "total latency", clat: "completion latency",
                 slat: "submission latency", randread: "Read", randwrite: "Write"};
  const UNIT_PARTS = new Set(["bw", "mb_s", "iops", "clat_hist", "burst", "service_s", "period_s"]);

  // A CrystalDiskMark job's name as CrystalDiskMark spells its test: "SEQ1M-Q8T1-read" is "SEQ1M Q8T1" (the
  // direction follows in words).
  const CDM_NAME = (part) => /^((?:SEQ|RND)\w+)-(Q\d+T\d+)(-(read|write))?$/.exec(part)?.slice(1, 3).join(" ");

  function words(name) {
    const parts = name.split(".").filter((p) => !UNIT_PARTS.has(p)).map((p) => WORDS[p] || CDM_NAME(p) ||
      (/^qd\d+$/.test(p) ? p.toUpperCase() : /^bs\d+[km]$/.test(p) ? p.slice(2).toUpperCase()
        : /^mix\d+$/.test(p) ? `${p.slice(3)}% read` : p));
    return parts.join(", ") || name;
  }

  // A step's percentile curve: its job in words, its direction first unless the job names it already.
  function curveLabel(c) {
    const job = c.job ? words(c.job) : "";
    return job.startsWith(WORDS[c.dir]) ? job : [WORDS[c.dir], job].filter(Boolean).join(", ");
  }

  // --- the charts of one run, as specs that compare() can merge by id ---------------------------

  // lat_p: total latency, the one basis of every latency figure since suite format 1's second versions;
  // clat_p: completion latency, which runs of the earlier versions report.
  const PERCENTILE_RE = /^(?:(.+)\.)?(read|write|trim)\.(c?lat)_p([\d.]+)$/;
  const BASIS = {lat: "total latency (submission + completion)", clat: "completion latency"};

  // A step's latency percentiles in µs, one curve per direction (and job, for multi-job steps).
  function percentileCurves(step) {
    const curves = new Map();
    for (const m of step.metrics || []) {
      const match = PERCENTILE_RE.exec(m.name);
      if (!match) continue;
      const key = `${match[2]}|${match[1] || ""}|${match[3]}`;
      if (!curves.has(key)) curves.set(key, {dir: match[2], job: match[1] || "", basis: match[3], values: {}});
      curves.get(key).values["p" + match[4]] = m.value / 1000;
    }
    return [...curves.values()].map(({dir, job, basis, values}) => {
      const x = PERCENTILES.map((p) => "p" + p).filter((p) => p in values);
      return {dir, job, basis, x, y: x.map((p) => values[p])};
    });
  }

  // The title's words for the bases the curves use: one, or both when runs of both kinds are compared.
  function basisWords(curves) {
    return [...new Set(curves.map((c) => BASIS[c.basis]))].join(" / ");
  }

  const PERCENTILE_AXES = {xAxis: {kind: "category", label: "percentile of the IOs (%)"},
                           yAxis: {label: "latency (µs)", log: true}};

  // Every single test side by side; a matrix step's many jobs get their own chart in the step's section.
  function latencyCharts(doc) {
    const byDir = {read: [], write: [], trim: []};
    for (const step of doc.steps.filter((st) => st.kind !== "matrix")) {
      for (const c of percentileCurves(step)) {
        byDir[c.dir].push({label: c.job ? `${step.title}, ${words(c.job)}` : step.title, x: c.x, y: c.y,
                           basis: c.basis});
      }
    }
    return Object.entries(byDir).filter(([, lines]) => lines.length).map(([dir, lines]) => ({
      ...PERCENTILE_AXES, id: `latency-${dir}`, title: `${WORDS[dir]}: ${basisWords(lines)} percentiles`, lines}));
  }

  // Consistency (methodology 5): every second's IOPS as a dot, the window the steady-state rule judged shaded
  // (the step's figures are its mean, minimum and deviation), a line where steady state was reached, and the
  // spare-area variant overlaid on the whole-drive test; log scale first (the drops are orders of magnitude),
  // linear a click away.
  function consistencyCharts(doc) {
    const steps = doc.steps.filter((s) => s.key.startsWith("consistency"));
    const lines = [];
    const bands = [];
    const markers = [];
    for (const step of steps) {
      const m = metricMap(step);
      for (const s of stepSeries(doc, step).filter((s) => s.name.endsWith(".iops"))) {
        const l = line(steps.length > 1 ? `${step.title}: ${words(s.name)}` : words(s.name), s);
        lines.push(l);
        if (m["steady.window_from_s"] && m["steady.window_to_s"]) {
          const verdict = m["steady.reached"]?.value === 1 ? "steady" : "not steady";
          // the window's proof beside it: its slope, and the drive fills written before and within it
          const proof = [];
          const slope = m["steady.slope_percent_per_min"];
          if (slope) proof.push(`slope ${slope.value >= 0 ? "+" : ""}${slope.value.toFixed(2)}%/min`);
          const before = m["steady.fills_before"];
          const within = m["steady.fills_in_window"];
          if (before && within) proof.push(`${before.value.toFixed(2)} fills before, ${within.value.toFixed(2)} within`);
          bands.push({label: [`${step.key}: judged window, ${verdict}`, ...proof].join(", "),
                      from: m["steady.window_from_s"].value, to: m["steady.window_to_s"].value});
        } else if (!m["steady.rounds"]) {
          // A run before the judged window was recorded: its steady part from the suite's from_s (scaled).
          const from = m["steady.from_s"]?.value ?? step.spec?.steady?.from_s ?? STEADY_FROM_S;
          const last = Math.max(from, ...l.x);
          if (!bands.some((b) => b.from === from)) bands.push({label: `steady state from ${from} s`, from, to: last});
        }
        if (m["steady.reached_s"]) markers.push({at: m["steady.reached_s"].value, label: `${step.key}: steady`});
      }
    }
    return lines.length ? [{id: "consistency", title: "Consistency: IOPS every second, the judged window shaded",
                            xAxis: {kind: "time", label: "time (s)"}, yAxis: {label: "IOPS", log: true}, dots: true,
                            toggle: true, lines, bands: bands.length ? bands : null, markers}] : [];
  }

  // A step's completion-latency histogram from fio's clat_hist log (the IOs of every logged interval, per bin),
  // with its own percentiles marked: the first bin at which the IOs counted reach the share, as fio finds its
  // percentiles in the same bins. The step's latency figures are of total latency, another basis, so they are
  // not drawn across it.
  function histogramPercentiles(s) {
    const total = s.y.reduce((a, b) => a + b, 0);
    return PERCENTILES.map((p) => {
      let seen = 0;
      const i = s.y.findIndex((count) => (seen += count) >= total * Number(p) / 100);
      return {at: s.x[i] / 1000, p};
    });
  }

  function histogramCharts(doc, step) {
    const hists = stepSeries(doc, step).filter((s) => s.x_unit === "ns");
    if (!hists.length) return [];
    const markers = hists.flatMap((s) => histogramPercentiles(s).map(({at, p}) => ({
      at, label: hists.length > 1 ? `${words(s.name)} p${p}` : `p${p}`})));
    return [{id: `hist-${step.key}`, title: `${step.title}: completion latency histogram, its percentiles marked`,
             xAxis: X_AXES.ns, yAxis: {label: "IOs per bin (count)"}, histogram: true,
             lines: hists.map((s) => line(words(s.name), s)), markers}];
  }

  function histogramFigures(doc) {
    return doc.steps.flatMap((step) => histogramCharts(doc, step));
  }

  function slcCharts(doc) {
    return doc.steps.filter((s) => s.key.startsWith("seq-fill")).map((step) => ({
      id: `slc-${step.key}`, title: `SLC cache: write MB/s during ${step.title}`,
      xAxis: {kind: "time", label: "time (s)"}, yAxis: {label: "MB/s"},
      lines: stepSeries(doc, step).filter((s) => s.name === "write.bw").map((s) => line("Write", s)),
    })).filter((spec) => spec.lines.length);
  }

  function sweepCharts(doc) {
    const byName = {};
    for (const step of doc.steps) {
      for (const s of stepSeries(doc, step).filter((s) => s.x_unit === "offset")) {
        (byName[s.name] = byName[s.name] || []).push(line(step.title, s));
      }
    }
    return Object.entries(byName).map(([name, lines]) => ({
      id: `sweep-${name}`, title: `Zone sweep, ${words(name)}: before, during and after the torture`,
      xAxis: X_AXES.offset, yAxis: {label: lines[0].unit}, lines}));
  }

  function transferCharts(doc) {
    return doc.steps.map((step) => ({
      id: `xfer-${step.key}`, title: `${step.title}: MB/s against transfer size`, xAxis: X_AXES.bytes,
      yAxis: {label: "MB/s"},
      lines: stepSeries(doc, step).filter((s) => s.x_unit === "bytes").map((s) => line(words(s.name), s)),
    })).filter((spec) => spec.lines.length);
  }

  // Mixed Burst as a timeline (methodology 8): each read burst's service time, at the moment it began, with
  // the background's periods behind it, each a band from its first write to its last completion.
  function burstTimelines(doc) {
    return doc.steps.filter((s) => s.kind === "burst").map((step) => {
      const own = stepSeries(doc, step);
      const periods = own.find((s) => s.name === "burst.write.period_s");
      return {
        id: `burst-timeline-${step.key}`,
        title: `${step.title}: each read burst's service time, over the background's writes`,
        xAxis: {kind: "time", label: "time from the background's first period (s)"}, yAxis: {label: "service time (s)"},
        dots: true,
        lines: own.filter((s) => s.name === "burst.read.service_s").map((s) => line("Read burst", s)),
        bands: periods && periods.x.length ? periods.x.map((x, i) => ({
          label: `background writes ${num(periods.y[i])} s`, from: x / 1000, to: x / 1000 + periods.y[i]})) : null,
      };
    }).filter((spec) => spec.lines.length);
  }

  // The run's temperature, sampled through every step (purge, TRIM and idle too), drawn over the steps: each
  // step a band from its start to its end, in the same seconds since the run started.
  function temperatureCharts(doc) {
    const lines = doc.series.filter((s) => s.step_id === null && s.name === "temperature")
      .map((s) => line("Drive", s));
    return lines.length ? [{id: "temperature", title: "Drive temperature over the run, under its steps", lines,
                            xAxis: {kind: "time", label: "time since the run started (s)"}, yAxis: {label: "°C"},
                            bands: stepBands(doc)}] : [];
  }

  // Where each step that began ran. A step cut off by the run's end (cancel, power cut) has no end of its own:
  // its band runs on to the run's.
  function stepBands(doc) {
    return doc.steps.filter((st) => st.started_at !== null).map((st) => ({
      label: st.key, from: st.started_at - doc.started_at, to: (st.finished_at ?? doc.finished_at) - doc.started_at,
    }));
  }

  function figures(doc) {
    return [...consistencyCharts(doc), ...burstTimelines(doc), ...latencyCharts(doc), ...histogramFigures(doc),
            ...transferCharts(doc), ...sweepCharts(doc), ...slcCharts(doc), ...temperatureCharts(doc)]
      .filter((spec) => spec.lines.length || spec.note);
  }

  const ALONG = {ms: "over time", offset: "by zone", bytes: "by transfer size"};

  // Every series of a step, whatever its kind: one chart per x unit and display unit; and its percentiles.
  function stepCharts(doc, step) {
    const curves = percentileCurves(step);
    const percentiles = curves.length ? [{
      ...PERCENTILE_AXES, id: `step-${step.key}-percentiles`, title: `${step.title}: ${basisWords(curves)} percentiles`,
      lines: curves.map((c) => ({label: curveLabel(c), x: c.x, y: c.y}))}] : [];
    const groups = {};
    for (const s of stepSeries(doc, step).filter((s) => s.x_unit !== "ns")) { // the histogram is a figure
      const l = line(words(s.name), s);
      const key = `${s.x_unit}|${l.unit}`;
      (groups[key] = groups[key] || {xUnit: s.x_unit, unit: l.unit, lines: []}).lines.push(l);
    }
    return [...percentiles.map((spec) => ({...spec, tab: "Latency percentiles"})),
            ...Object.entries(groups).map(([key, g]) => ({
              id: `step-${step.key}-${key}`, title: `${step.title}: ${g.unit} ${ALONG[g.xUnit] || ""}`.trim(),
              tab: `${g.unit} ${ALONG[g.xUnit] || ""}`.trim(), xAxis: xAxis(g.xUnit), yAxis: {label: g.unit},
              lines: g.lines}))];
  }

  // --- drawing -----------------------------------------------------------------------------------

  // A log axis labels 1, 2 and 5 of each decade, and hands the values function null for its other ticks: no
  // label there, not num()'s dash.
  function tickValues(u, splits) {
    return splits.map((v) => (v === null ? "" : num(v)));
  }

  function xValues(axis, categories) {
    if (axis.kind === "category") return (u, splits) => splits.map((i) => categories[i] ?? "");
    if (axis.kind === "bytes") return (u, splits) => splits.map((v) => (v === null ? "" : bytes(v)));
    return tickValues;
  }

  // Spans of the x axis under a chart's lines (a run's steps under its temperature), drawn first, under the
  // grid and the lines: a shade for each (two, alternating, so that steps that touch stay apart), a line where
  // each begins (a step shorter than a pixel still shows), and its label where the band is wide enough for it.
  // The x axis spans every band, even where no point falls, and the legend names the band under the cursor. Drawn
  // in the chart's theme, `look`.
  function bandsPlugin(bands, look) {
    const first = Math.min(...bands.map((b) => b.from));
    const last = Math.max(...bands.map((b) => b.to));
    const range = (u, min, max) => [Math.min(min, first), Math.max(max, last)];
    const opts = (u, given) => {
      const [x, ...lines] = given.series;
      const value = (self, v, ...rest) => `${x.value(self, v, ...rest)} ${bandAt(bands, v)}`.trim();
      return {...given, scales: {...given.scales, x: {...given.scales.x, range}}, series: [{...x, value}, ...lines]};
    };
    const draw = (u) => {
      const {ctx, bbox} = u;
      ctx.save();
      ctx.beginPath();
      ctx.rect(bbox.left, bbox.top, bbox.width, bbox.height);
      ctx.clip();
      ctx.font = `${10 * uPlot.pxRatio}px sans-serif`;
      ctx.textBaseline = "top";
      bands.forEach((b, i) => {
        const left = u.valToPos(b.from, "x", true);
        const right = u.valToPos(b.to, "x", true);
        ctx.fillStyle = i % 2 ? "rgba(127, 127, 127, 0.12)" : "rgba(31, 119, 180, 0.10)";
        ctx.fillRect(left, bbox.top, right - left, bbox.height);
        ctx.fillStyle = look.faint;
        ctx.fillRect(left, bbox.top, uPlot.pxRatio, bbox.height);
        const text = 4 * uPlot.pxRatio + ctx.measureText(b.label).width;
        ctx.fillStyle = look.ink;
        if (text <= right - left) ctx.fillText(b.label, left + 2 * uPlot.pxRatio, bbox.top + 2 * uPlot.pxRatio);
      });
      ctx.restore();
    };
    return {opts, hooks: {drawClear: [draw]}};
  }

  function bandAt(bands, x) {
    const band = x === null ? null : bands.find((b) => b.from <= x && x <= b.to);
    return band ? band.label : "";
  }

  function chartData(spec, yLog) {
    const clean = (ys) => ys.map((v) => (v === null || v === undefined || (yLog && v <= 0) ? null : v));
    if (spec.xAxis.kind === "category") {
      const categories = [...new Set([...(spec.categories || []), ...spec.lines.flatMap((l) => l.x)])];
      const data = [categories.map((_, i) => i)];
      for (const l of spec.lines) {
        const at = new Map(l.x.map((c, i) => [c, l.y[i]]));
        data.push(clean(categories.map((c) => (at.has(c) ? at.get(c) : null))));
      }
      return {categories, data};
    }
    return {categories: null, data: uPlot.join(spec.lines.map((l) => [l.x, clean(l.y)]))};
  }

  // Values across a chart at x (a step's latency percentiles over its histogram): a dashed line each, labelled.
  // Markers at one place (p50 and p90 in one bin) share a line and a label; a label goes on the first row where
  // it clears the one before it, so that none overlaps another. Drawn in the chart's theme, `look`.
  function markersPlugin(markers, look) {
    const draw = (u) => {
      const {ctx, bbox} = u;
      const r = uPlot.pxRatio;
      ctx.save();
      ctx.font = `${10 * r}px sans-serif`;
      ctx.setLineDash([4 * r, 3 * r]);
      const at = new Map();
      for (const m of markers) {
        const x = Math.round(u.valToPos(m.at, "x", true));
        if (x < bbox.left || x > bbox.left + bbox.width) continue;
        at.set(x, [...(at.get(x) || []), m.label]);
      }
      const rows = []; // each row's right end so far
      for (const [x, labels] of [...at.entries()].sort((a, b) => a[0] - b[0])) {
        ctx.strokeStyle = look.faint;
        ctx.beginPath();
        ctx.moveTo(x, bbox.top);
        ctx.lineTo(x, bbox.top + bbox.height);
        ctx.stroke();
        const text = labels.join(", ");
        const width = ctx.measureText(text).width;
        // right of its line, or left of it where the plot ends first
        const left = x + 2 * r + width <= bbox.left + bbox.width ? x + 2 * r : x - 2 * r - width;
        let row = rows.findIndex((end) => end + 4 * r <= left);
        if (row < 0) row = rows.push(0) - 1;
        rows[row] = left + width;
        ctx.fillStyle = look.ink;
        ctx.fillText(text, left, bbox.top + (10 + 11 * row) * r);
      }
      ctx.restore();
    };
    return {hooks: {draw: [draw]}};
  }

  // The small print under every chart: the fio versions and suites of the runs drawn.
  function fineprint(docs) {
    const fios = [...new Set(docs.map((d) => ((d.environment || {}).tools || {}).fio || "fio not recorded"))];
    const suites = [...new Set(docs.map((d) => `${d.suite} ${d.suite_hash.slice(0, 12)}`))];
    return `${fios.join(" / ")} · suite ${suites.join(" / ")}`;
  }

  // The figures a report opens on (the key charts), then the rest, each kind a tab of its own.
  const FIGURE_TABS = [["consistency", "Key charts"], ["latency-", "Key charts"], ["xfer-", "Key charts"],
                       ["hist-", "Latency histograms"], ["sweep-", "Zone sweeps"], ["slc-", "SLC cache"],
                       ["burst-timeline-", "Mixed Burst"], ["temperature", "Temperature"]];

  function figureTab(spec) {
    return (FIGURE_TABS.find(([prefix]) => spec.id.startsWith(prefix)) || [null, "Other"])[1];
  }

  // Charts grouped into tabs (by `name`, in the order first seen), one tab's charts shown at a time; a single
  // group needs no tab. Every chart is drawn at once: the page and its tests find each one; print shows them all.
  let tabCount = 0;

  function tabbed(parent, specs, name, fine) {
    const groups = new Map();
    for (const spec of specs) groups.set(name(spec), [...(groups.get(name(spec)) || []), spec]);
    // an item with a node (a step's table of every metric) is shown as it is
    const show = (spec, into) => (spec.node ? into.append(spec.node) : render(spec, into, fine));
    if (groups.size < 2) {
      for (const spec of specs) show(spec, parent);
      return;
    }
    const list = el("div", {role: "tablist", class: "tabs"});
    parent.append(list);
    const tabs = [];
    [...groups].forEach(([label, group], i) => {
      const id = `tab-${++tabCount}`;
      const tab = el("button", {type: "button", role: "tab", id, "aria-controls": `${id}-panel`,
                                "aria-selected": String(i === 0), tabindex: i === 0 ? "0" : "-1"},
                     group.length > 1 ? `${label} (${group.length})` : label);
      const panel = el("div", {role: "tabpanel", id: `${id}-panel`, "aria-labelledby": id, class: "tab-panel"});
      panel.hidden = i > 0;
      list.append(tab);
      parent.append(panel);
      tabs.push([tab, panel]);
      for (const spec of group) show(spec, panel);
    });
    const pick = (chosen) => tabs.forEach(([tab, panel], i) => {
      tab.setAttribute("aria-selected", String(i === chosen));
      tab.tabIndex = i === chosen ? 0 : -1;
      panel.hidden = i !== chosen;
    });
    tabs.forEach(([tab], i) => {
      tab.addEventListener("click", () => pick(i));
      tab.addEventListener("keydown", (event) => { // the arrow keys move along the tabs
        const step = {ArrowRight: 1, ArrowLeft: -1}[event.key];
        if (!step) return;
        const next = (i + step + tabs.length) % tabs.length;
        pick(next);
        tabs[next][0].focus();
      });
    });
  }

  // The chart in words, its text alternative: each line's count, range and mean, or its value at each category.
  function chartText(spec) {
    const unit = spec.yAxis.label;
    const lines = spec.lines.map((l) => {
      const ys = l.y.filter((v) => v !== null && v !== undefined);
      if (!ys.length) return `${l.label}: no value`;
      if (spec.xAxis.kind === "category") return `${l.label}: ${l.x.map((c, i) => `${c} ${num(l.y[i])}`).join(", ")}`;
      const mean = ys.reduce((a, b) => a + b, 0) / ys.length;
      return `${l.label}: ${ys.length} values from ${num(Math.min(...ys))} to ${num(Math.max(...ys))}, ` +
        `mean ${num(mean)}`;
    });
    const marked = (spec.markers || []).map((m) => `${m.label} at ${num(m.at)}`);
    return `${spec.title}, ${unit} against ${spec.xAxis.label}. ${lines.join("; ")}.` +
      (marked.length ? ` Marked: ${marked.join(", ")}.` : "");
  }

  function render(shown, parent, fine) {
    const spec = fittedUnits(shown);
    const figure = el("figure", {class: "chart", "data-chart": spec.id}, el("figcaption", {}, spec.title));
    if (spec.note) figure.append(el("p", {class: "note"}, spec.note));
    parent.append(figure);
    if (!spec.lines.length) return;
    const text = el("p", {class: "chart-text visually-hidden", id: `text-${++tabCount}`}, chartText(spec));
    const holder = el("div", {class: "plot", role: "img", "aria-label": spec.title, "aria-describedby": text.id});
    figure.append(holder, text, el("p", {class: "fineprint"}, fine));
    let u = plot(spec, holder, parent, Boolean(spec.yAxis.log));
    if (spec.toggle) {
      const scale = el("button", {type: "button", class: "scale"}, spec.yAxis.log ? "Linear scale" : "Log scale");
      scale.addEventListener("click", () => {
        const log = u.scales.y.distr !== 3;
        const at = charts.indexOf(u);
        u.destroy();
        u = plot(spec, holder, parent, log);
        charts.splice(at, 1, u);
        charts.pop(); // plot() pushed it again at the end
        scale.textContent = log ? "Linear scale" : "Log scale";
      });
      figure.insertBefore(el("p", {class: "toggle"}, scale), holder);
    }
    const title = `${spec.title} (${spec.yAxis.label})`;
    SsdbenchExport.buttons(figure, spec.title, {
      png: () => SsdbenchExport.uplotPng(u, title, fine),
      svg: () => SsdbenchExport.uplotSvg(u, title, fine, {bands: spec.bands, dots: spec.dots}),
    });
  }

  function plot(spec, holder, parent, yLog) {
    const {categories, data} = chartData(spec, yLog);
    const isCategory = categories !== null;
    const width = Math.max(360, Math.min(1100, (parent.clientWidth || 900) - 8));
    const xLog = Boolean(spec.xAxis.log);
    const t = theme();
    const plugins = [...(spec.bands ? [bandsPlugin(spec.bands, t)] : []),
                     ...(spec.markers && spec.markers.length ? [markersPlugin(spec.markers, t)] : [])];
    const opts = {
      width, height: 280, plugins,
      scales: {
        x: isCategory ? {time: false, range: () => [-0.5, categories.length - 0.5]}
                      : {time: false, distr: xLog ? 3 : 1, log: spec.xAxis.kind === "bytes" ? 2 : 10},
        y: {distr: yLog ? 3 : 1, log: 10},
      },
      series: [
        {label: spec.xAxis.label, value: (u, v) => (v === null ? "" : isCategory ? categories[v] ?? "" :
                                                     spec.xAxis.kind === "bytes" ? bytes(v) : num(v))},
        ...spec.lines.map((l, i) => ({
          label: l.label, stroke: t.colors[i % t.colors.length], width: 1.5, spanGaps: !isCategory && !spec.histogram,
          points: isCategory || spec.dots ? {show: true, size: spec.dots ? 4 : 7, fill: t.colors[i % t.colors.length]}
                                          : {},
          paths: spec.dots ? () => null : spec.histogram ? uPlot.paths.stepped({align: 1}) : undefined,
          value: (u, v) => (v === null || v === undefined ? "" : num(v)),
        })),
      ],
      axes: [
        {...t.axis, label: spec.xAxis.label, values: xValues(spec.xAxis, categories),
         splits: isCategory ? () => categories.map((_, i) => i) : undefined, rotate: isCategory ? -20 : 0,
         size: isCategory ? 90 : 40},
        {...t.axis, label: spec.yAxis.label, size: 70, values: tickValues},
      ],
    };
    const u = new uPlot(opts, data, holder);
    u.look = t; // its export's ground and ink: the theme it was drawn in, whatever the system's is by then
    charts.push(u);
    return u;
  }

  // --- tables ------------------------------------------------------------------------------------

  // CrystalDiskMark style: each measured step with read and write MB/s and IOPS, and its latency.
  function summaryTable(docs) {
    const cols = [["read.mb_s", "Read MB/s"], ["write.mb_s", "Write MB/s"], ["read.iops", "Read IOPS"],
                  ["write.iops", "Write IOPS"], ["read.lat_mean", "Read lat avg"], ["read.lat_max", "Read lat max"],
                  ["write.lat_mean", "Write lat avg"], ["write.lat_max", "Write lat max"]];
    const multi = docs.length > 1;
    const head = el("tr", {}, el("th", {}, "Step"), multi ? el("th", {}, "Run") : null,
                    ...cols.map(([, label]) => el("th", {}, label)));
    const rows = [];
    for (const key of stepKeys(docs)) {
      for (const doc of docs) {
        const step = doc.steps.find((s) => s.key === key);
        const metrics = step ? metricMap(step) : {};
        if (cols.some(([name]) => metrics[name])) rows.push([doc, step, metrics]);
      }
    }
    const units = Object.fromEntries(cols.filter(([name]) => name.includes(".lat_")).map(([name]) =>
      [name, latencyUnit(rows.filter(([, , m]) => m[name]).map(([, , m]) => m[name].value))]));
    const body = el("tbody");
    for (const [doc, step, metrics] of rows) {
      body.append(el("tr", {}, el("th", {title: step.key}, step.title), multi ? el("td", {}, runLabel(doc)) : null,
                     ...cols.map(([name]) => (!metrics[name] ? el("td", {}, "")
                       : units[name] ? latencyCell(metrics[name], units[name]) : metricCell(metrics[name])))));
    }
    if (!body.children.length) return el("p", {class: "note"}, "No step has measured MB/s yet.");
    return el("table", {class: "summary"}, el("thead", {}, head), body);
  }

  // The CrystalDiskMark rows (methodology 9) as CrystalDiskMark shows them: a row per test, read and write.
  const CDM_RE = /^(.+)-(read|write)\.(read|write)\.(mb_s|iops)$/;

  function cdmTable(docs) {
    const multi = docs.length > 1;
    const body = el("tbody");
    for (const doc of docs) {
      for (const step of doc.steps.filter((st) => st.key.startsWith("cdm"))) {
        const rows = new Map();
        for (const m of step.metrics || []) {
          const match = CDM_RE.exec(m.name);
          if (!match || match[2] !== match[3]) continue;
          if (!rows.has(match[1])) rows.set(match[1], {});
          rows.get(match[1])[`${match[2]}.${match[4]}`] = m;
        }
        for (const [test, cells] of rows) {
          body.append(el("tr", {}, el("th", {}, test.replace("-", " ")), multi ? el("td", {}, runLabel(doc)) : null,
                         ...["read.mb_s", "write.mb_s", "read.iops", "write.iops"].map(
                           (name) => (cells[name] ? metricCell(cells[name]) : el("td", {}, "")))));
        }
      }
    }
    if (!body.children.length) return null;
    const head = el("tr", {}, el("th", {}, "Test"), multi ? el("th", {}, "Run") : null, el("th", {}, "Read MB/s"),
                    el("th", {}, "Write MB/s"), el("th", {}, "Read IOPS"), el("th", {}, "Write IOPS"));
    return el("section", {}, el("h2", {}, "CrystalDiskMark rows"),
              el("table", {class: "summary cdm"}, el("thead", {}, head), body));
  }

  function stepKeys(docs) {
    return [...new Set(docs.flatMap((d) => d.steps.map((s) => s.key)))];
  }

  function runLabel(doc) {
    return `run ${doc.id}: ${doc.drive.model || doc.drive.path}`;
  }

  // Every metric of a step, with its unit and its source; several runs side by side.
  function metricsTable(docs, key) {
    const steps = docs.map((d) => d.steps.find((s) => s.key === key));
    const names = [...new Set(steps.flatMap((s) => (s ? s.metrics.map((m) => m.name) : [])))];
    if (!names.length) return el("p", {class: "note"}, "No metrics.");
    const head = el("tr", {}, el("th", {}, "Metric"),
                    ...docs.map((d) => el("th", {}, docs.length > 1 ? runLabel(d) : "Value")), el("th", {}, "Source"));
    // the step's latencies in one unit, the one its largest reads best in
    const latency = latencyUnit(steps.flatMap((s) => (s ? s.metrics.filter((m) => m.unit === "ns") : []))
      .map((m) => m.value));
    const body = el("tbody");
    for (const name of names) {
      const cells = steps.map((s) => (s ? metricMap(s)[name] : null));
      const first = cells.find(Boolean);
      body.append(el("tr", {}, el("th", {}, name),
                     ...cells.map((m) => (!m ? el("td", {}, "") : m.unit === "ns" ? latencyCell(m, latency)
                       : metricCell(m))),
                     el("td", {class: "source"}, first.source)));
    }
    return el("table", {class: "metrics"}, el("thead", {}, head), body);
  }

  // --- the two entry points ------------------------------------------------------------------------

  // A section that folds: its title the <summary>; folded at first, so that the page opens on its summary.
  function fold(title, cls) {
    return el("details", {class: `fold ${cls || ""}`.trim()}, el("summary", {}, el("h2", {}, title)));
  }

  function draw(container, doc) {
    container.replaceChildren();
    const fine = fineprint([doc]);
    const tables = fold("Every measured step: MB/s, IOPS and latency", "tables");
    tables.append(cdmTable([doc]) || "", summaryTable([doc]));
    const figs = fold("Figures", "figures");
    container.append(tables, figs);
    tabbed(figs, figures(doc), figureTab, fine);
    const stepsSection = fold("Steps: each one's metrics, series and fio job file", "steps");
    container.append(stepsSection);
    for (const step of doc.steps) {
      const heading = el("h3", {}, `${step.idx + 1}. ${step.title} `, el("span", {class: "badge"}, step.state));
      const box = el("details", {class: `step fold state-${step.state}`}, el("summary", {}, heading),
                     el("p", {class: "meta"}, [`${step.key} · ${step.kind} · estimated ${clock(step.estimate_s)}`,
                                               ...settled(step)].join(" · ")));
      if (step.error) box.append(el("p", {class: "error"}, step.error));
      // Why the figures may not be the drive's (results/validity.py): a badge by the state, the reasons below.
      if (step.suspect && step.suspect.length) {
        const badge = el("span", {class: "badge suspect", title: step.suspect.join("\n")}, "suspect");
        heading.append(" ", badge);
        box.append(el("ul", {class: "suspect"}, ...step.suspect.map((reason) => el("li", {}, reason))));
      }
      // What ran otherwise than the suite names, to fit the drive's logical block (a 4Kn drive's 512 B rows).
      const adapted = (step.detail || {}).adapted;
      if (Array.isArray(adapted) && adapted.length) {
        heading.append(" ", el("span", {class: "badge adapted", title: adapted.join("\n")}, "adapted"));
        box.append(el("ul", {class: "adapted"}, ...adapted.map((note) => el("li", {}, `adapted to the drive: ${note}`))));
      }
      stepsSection.append(box);
      const metrics = {tab: "Every metric", node: metricsTable([doc], step.key)};
      tabbed(box, [...stepCharts(doc, step), metrics], (spec) => spec.tab, fine);
      if (step.job_file) box.append(el("details", {}, el("summary", {}, "fio job file"), el("pre", {}, step.job_file)));
    }
  }

  // How the step began: the seconds the drive idled first (the suite says which steps idle) and its
  // temperature then. Runs recorded before steps said so have neither.
  function settled(step) {
    const detail = step.detail || {};
    const out = [];
    if (detail.cool_down && "idled_s" in detail.cool_down) {
      const cool = detail.cool_down;
      // Runs recorded before the idle was the fixed seconds alone also waited to cool ("cooled").
      const wait = "cooled" in cool ? ", then the wait to cool" : "";
      const fixed = typeof cool.minimum_s === "number" ? ` (the suite's ${cool.minimum_s} s${wait})` : "";
      const between = cool.between_runs ? ", after the repeat set's run before" : "";
      out.push(cool.state === "not asked" ? "no idle first" : `idled ${clock(cool.idled_s)} first${fixed}${between}`);
    }
    if (typeof detail.began_at_c === "number") out.push(`began at ${detail.began_at_c} °C`);
    return out;
  }

  // Several runs: each chart of any run, with the same chart of the others overlaid on it.
  function merge(perRun) {
    const merged = new Map();
    perRun.forEach(({doc, specs}) => {
      for (const spec of specs) {
        const lines = spec.lines.map((l) => ({...l, label: `run ${doc.id} ${l.label}`}));
        // Each run's steps ran at times of its own, so overlaid runs get no step bands; a step's percentiles
        // are its own run's. Each run's judged steady-state window is its own too, named with its run.
        if (!merged.has(spec.id)) {
          merged.set(spec.id, {...spec, lines: [], note: null, categories: [], markers: null,
                               bands: spec.id === "consistency" ? [] : null});
        }
        const into = merged.get(spec.id);
        into.lines.push(...lines);
        if (into.bands) {
          // one band for a window that runs share, naming each run whose window it is
          for (const b of spec.bands || []) {
            const same = into.bands.find((o) => o.from === b.from && o.to === b.to && o.own === b.label);
            if (same) same.runs.push(doc.id);
            else into.bands.push({...b, own: b.label, runs: [doc.id]});
          }
          for (const o of into.bands) o.label = `run${o.runs.length > 1 ? "s" : ""} ${o.runs.join(", ")} ${o.own}`;
        }
        into.categories = [...new Set([...into.categories, ...(spec.categories || [])])];
      }
    });
    return [...merged.values()].map((spec) => (spec.bands && !spec.bands.length ? {...spec, bands: null} : spec));
  }

  function compare(container, docs) {
    container.replaceChildren();
    const fine = fineprint(docs);
    const tables = fold("Every measured step, run by run", "tables");
    tables.append(cdmTable(docs) || "", summaryTable(docs));
    const figs = fold("Figures, overlaid", "figures");
    container.append(tables, figs);
    tabbed(figs, merge(docs.map((doc) => ({doc, specs: figures(doc)}))), figureTab, fine);
    const stepsSection = fold("Steps, side by side", "steps");
    container.append(stepsSection);
    for (const key of stepKeys(docs)) {
      const step = docs.map((d) => d.steps.find((s) => s.key === key)).find(Boolean);
      const box = el("details", {class: "step fold"}, el("summary", {}, el("h3", {}, step.title)),
                     el("p", {class: "meta"}, key));
      stepsSection.append(box);
      const perRun = docs.map((doc) => {
        const own = doc.steps.find((s) => s.key === key);
        return {doc, specs: own ? stepCharts(doc, own) : []};
      });
      tabbed(box, [...merge(perRun), {tab: "Every metric", node: metricsTable(docs, key)}], (spec) => spec.tab, fine);
    }
  }

  // "Unfold every section" and "Fold every section"; a printed page holds every section, unfolded.
  function folding(root) {
    const all = (open) => root.querySelectorAll("details.fold").forEach((d) => { d.open = open; });
    root.querySelectorAll("[data-fold]").forEach((b) => b.addEventListener("click", () => all(b.dataset.fold === "open")));
    let before = null;
    global.addEventListener("beforeprint", () => {
      before = [...root.querySelectorAll("details.fold")].map((d) => d.open);
      all(true);
    });
    global.addEventListener("afterprint", () => {
      if (before) root.querySelectorAll("details.fold").forEach((d, i) => { d.open = before[i] ?? d.open; });
    });
  }

  // A flagged figure's ⚠ leads to its cause (#cause-N): it opens, its details shown.
  function openTarget() {
    const target = global.location.hash && document.getElementById(global.location.hash.slice(1));
    if (target && target.tagName === "DETAILS") target.open = true;
  }

  function init() {
    folding(document);
    global.addEventListener("hashchange", openTarget);
    openTarget();
    SsdbenchExport.barButtons(document);
    SsdbenchExport.summaryButton(document);
  }
  if (document.readyState === "loading") document.addEventListener("DOMContentLoaded", init);
  else init();

  global.SsdbenchReport = {draw, compare, charts, clock, num, theme};
})(window);
