/* Take a chart away: every chart of a page saved as PNG or as SVG, in the browser, with no server and no
 * network (the offline report.html does the same).
 *
 * A ranked bar chart is an SVG already: it is saved as it is, and drawn onto a canvas for its PNG. A uPlot
 * chart draws on a canvas: its PNG is that canvas with the title, the legend and the small print added, and
 * its SVG is built from the chart's own data and scales (the points where uPlot put them, the ticks it chose).
 *
 *   SsdbenchExport.buttons(figure, name, {png, svg})   "Save PNG" and "Save SVG" under a figure
 *   SsdbenchExport.uplotSvg(u, title, fineprint, {bands, dots})  an SVG (text) of a uPlot chart
 *   SsdbenchExport.uplotPng(u, title, fineprint)        a Promise of a PNG Blob of a uPlot chart
 *   SsdbenchExport.svgPng(svg)                          a Promise of a PNG Blob of an <svg> element
 *   SsdbenchExport.summaryButton(root)                  "Save summary image" saves the summary's card as PNG
 */
(function (global) {
  "use strict";

  const NS = "http://www.w3.org/2000/svg";

  function download(name, blob) {
    const a = document.createElement("a");
    a.href = URL.createObjectURL(blob);
    a.download = name;
    document.body.append(a);
    a.click();
    a.remove();
    setTimeout(() => URL.revokeObjectURL(a.href), 10_000);
  }

  function fileName(text) {
    return text.toLowerCase().replace(/[^a-z0-9]+/g, "-").replace(/^-|-$/g, "").slice(0, 80) || "chart";
  }

  function buttons(figure, name, make) {
    const bar = document.createElement("p");
    bar.className = "save";
    for (const [kind, fn] of Object.entries(make)) {
      const b = document.createElement("button");
      b.type = "button";
      b.textContent = `Save ${kind.toUpperCase()}`;
      b.dataset.save = kind;
      b.addEventListener("click", async () => {
        const out = await fn();
        download(`${fileName(name)}.${kind}`, typeof out === "string" ? new Blob([out], {type: "image/svg+xml"}) : out);
      });
      bar.append(b);
    }
    figure.append(bar);
  }

  function node(tag, attrs, text) {
    const n = document.createElementNS(NS, tag);
    for (const [k, v] of Object.entries(attrs)) n.setAttribute(k, v);
    if (text !== undefined) n.textContent = text;
    return n;
  }

  const round = (v) => Math.round(v * 10) / 10;

  // The chart in CSS pixels: the plot box, each axis' ticks where uPlot drew them, each series as a line (split
  // at gaps) or as dots, the bands' shades a plugin drew (passed in), the legend's names and the small print.
  function uplotSvg(u, title, fineprint, options) {
    const {bands} = options || {};
    const t = u.look; // the chart's own colours: its series were drawn for this ground
    const r = uPlot.pxRatio;
    const box = {left: u.bbox.left / r, top: u.bbox.top / r, width: u.bbox.width / r, height: u.bbox.height / r};
    const legend = u.series.slice(1).filter((s) => s.show !== false);
    const head = 24;
    const foot = 18 + 16 * legend.length + 14;
    const svg = node("svg", {xmlns: NS, width: u.width, height: u.height + head + foot,
                             viewBox: `0 0 ${u.width} ${u.height + head + foot}`, "font-family": "sans-serif",
                             "font-size": 11, fill: t.ink});
    svg.append(node("rect", {width: "100%", height: "100%", fill: t.ground}));
    svg.append(node("text", {x: 4, y: 16, "font-size": 13, "font-weight": "bold"}, title));
    const g = node("g", {transform: `translate(0 ${head})`});
    svg.append(g);
    g.append(node("rect", {x: round(box.left), y: round(box.top), width: round(box.width), height: round(box.height),
                           fill: "none", stroke: t.faint}));
    u.axes.forEach((axis, i) => {
      if (axis.show === false || !axis._splits) return;
      const key = i === 0 ? "x" : axis.scale || "y";
      axis._splits.forEach((v, j) => {
        const label = axis._values ? axis._values[j] : String(v);
        if (label === null || label === undefined || label === "") return;
        if (i === 0) {
          const x = round(box.left + u.valToPos(v, key));
          g.append(node("line", {x1: x, x2: x, y1: box.top + box.height, y2: box.top + box.height + 4, stroke: t.faint}));
          g.append(node("text", {x, y: box.top + box.height + 16, "text-anchor": "middle"}, String(label)));
        } else {
          const y = round(box.top + u.valToPos(v, key));
          g.append(node("line", {x1: box.left, x2: box.left + box.width, y1: y, y2: y, stroke: t.grid}));
          g.append(node("text", {x: box.left - 6, y: y + 4, "text-anchor": "end"}, String(label)));
        }
      });
      const label = axis.label || "";
      if (i === 0) {
        g.append(node("text", {x: box.left + box.width / 2, y: u.height - 4, "text-anchor": "middle",
                               "font-weight": "bold"}, label));
      } else {
        const y = box.top + box.height / 2;
        g.append(node("text", {x: 12, y, transform: `rotate(-90 12 ${y})`, "text-anchor": "middle",
                               "font-weight": "bold"}, label));
      }
    });
    for (const b of bands || []) {
      const left = Math.max(box.left, box.left + u.valToPos(b.from, "x"));
      const right = Math.min(box.left + box.width, box.left + u.valToPos(b.to, "x"));
      if (right <= left) continue;
      g.append(node("rect", {x: round(left), y: round(box.top), width: round(right - left), height: round(box.height),
                             fill: "rgba(31, 119, 180, 0.10)"}));
      g.append(node("text", {x: round(left) + 3, y: box.top + 11, "font-size": 9}, b.label));
    }
    const xs = u.data[0];
    u.series.forEach((s, i) => {
      if (i === 0 || s.show === false) return;
      const color = typeof s.stroke === "function" ? s.stroke(u, i) : s.stroke || "#000";
      const ys = u.data[i];
      const dots = Boolean((options || {}).dots);
      let path = "";
      let pen = false;
      const circles = node("g", {fill: color});
      for (let j = 0; j < xs.length; j++) {
        const v = ys[j];
        if (v === null || v === undefined) { pen = s.spanGaps ? pen : false; continue; }
        const x = round(box.left + u.valToPos(xs[j], "x"));
        const y = round(box.top + u.valToPos(v, s.scale || "y"));
        if (x < box.left - 1 || x > box.left + box.width + 1) continue;
        if (dots) circles.append(node("circle", {cx: x, cy: y, r: 2}));
        else { path += `${pen ? "L" : "M"}${x} ${y}`; pen = true; }
      }
      if (dots) g.append(circles);
      else if (path) g.append(node("path", {d: path, stroke: color, fill: "none", "stroke-width": 1.5}));
    });
    legend.forEach((s, k) => {
      const y = u.height + 16 + 16 * k;
      const color = typeof s.stroke === "function" ? s.stroke(u, k + 1) : s.stroke || "#000";
      g.append(node("rect", {x: box.left, y: y - 9, width: 12, height: 10, fill: color}));
      g.append(node("text", {x: box.left + 18, y}, s.label || ""));
    });
    svg.append(node("text", {x: u.width - 4, y: u.height + head + foot - 4, "text-anchor": "end", "font-size": 9},
                             fineprint));
    return new XMLSerializer().serializeToString(svg);
  }

  // The canvas uPlot drew (axes, grid, series and the bands), under its title, over its legend and small print.
  function uplotPng(u, title, fineprint) {
    const r = uPlot.pxRatio;
    const t = u.look;
    const src = u.ctx.canvas;
    const legend = u.series.slice(1).filter((s) => s.show !== false);
    const head = 24 * r;
    const foot = (18 + 16 * legend.length + 14) * r;
    const out = document.createElement("canvas");
    out.width = src.width;
    out.height = src.height + head + foot;
    const ctx = out.getContext("2d");
    ctx.fillStyle = t.ground;
    ctx.fillRect(0, 0, out.width, out.height);
    ctx.drawImage(src, 0, head);
    ctx.fillStyle = t.ink;
    ctx.font = `bold ${13 * r}px sans-serif`;
    ctx.fillText(title, 4 * r, 16 * r);
    ctx.font = `${11 * r}px sans-serif`;
    legend.forEach((s, k) => {
      const y = head + src.height + (16 + 16 * k) * r;
      ctx.fillStyle = typeof s.stroke === "function" ? s.stroke(u, k + 1) : s.stroke || "#000";
      ctx.fillRect(u.bbox.left, y - 9 * r, 12 * r, 10 * r);
      ctx.fillStyle = t.ink;
      ctx.fillText(s.label || "", u.bbox.left + 18 * r, y);
    });
    ctx.fillStyle = t.ink;
    ctx.font = `${9 * r}px sans-serif`;
    ctx.textAlign = "end";
    ctx.fillText(fineprint, out.width - 4 * r, out.height - 4 * r);
    return new Promise((resolve) => out.toBlob(resolve, "image/png"));
  }

  // An SVG element as a PNG: drawn into an image from a data: URL (the pages allow images from data:), at twice
  // its size for print.
  function svgPng(svg) {
    const text = new XMLSerializer().serializeToString(svg);
    const width = Number(svg.getAttribute("width"));
    const height = Number(svg.getAttribute("height"));
    return new Promise((resolve, reject) => {
      const img = new Image();
      img.onload = () => {
        const out = document.createElement("canvas");
        out.width = 2 * width;
        out.height = 2 * height;
        const ctx = out.getContext("2d");
        ctx.scale(2, 2);
        ctx.drawImage(img, 0, 0, width, height);
        out.toBlob(resolve, "image/png");
      };
      img.onerror = () => reject(new Error("the chart's SVG could not be drawn"));
      img.src = "data:image/svg+xml;charset=utf-8," + encodeURIComponent(text);
    });
  }

  // The ranked bars drawn by the server: each gets its buttons once the page is there.
  function barButtons(root) {
    for (const figure of root.querySelectorAll("figure.bars")) {
      const svg = figure.querySelector("svg");
      const name = figure.querySelector("figcaption").textContent;
      buttons(figure, name, {png: () => svgPng(svg), svg: () => new XMLSerializer().serializeToString(svg)});
    }
  }

  // "Save summary image": the summary's card, drawn by the server as an SVG kept hidden beside it, as one PNG.
  function summaryButton(root) {
    const button = root.querySelector("#summary button[data-save-summary]");
    if (!button) return;
    const svg = root.querySelector("#summary .summary-image svg");
    const name = `${root.querySelector("#summary .model").textContent} summary`;
    button.addEventListener("click", async () => download(`${fileName(name)}.png`, await svgPng(svg)));
  }

  global.SsdbenchExport = {buttons, uplotSvg, uplotPng, svgPng, barButtons, summaryButton};
})(window);
