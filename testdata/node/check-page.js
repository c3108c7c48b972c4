// Opens a `memtrack report --format html` page in headless chromium (puppeteer-core, no
// download: the browser is Debian's) and prints, as one JSON object on stdout, what the page
// shows, for tests/views_html.rs to check against the JSON report of the same recording:
// console errors, uncaught exceptions and every request that left the file; each chart's curves,
// peak marks and plot geometry; the summary and the process table; each flame graph's width,
// its hover details and a search. Also saves a full-page screenshot.
//
// Usage: node check-page.js PAGE.html SCREENSHOT.png [SEARCH]   (SEARCH: the flame graphs' search
// term, default main; CHROMIUM overrides /usr/bin/chromium)
"use strict";

const path = require("path");
const puppeteer = require("puppeteer-core");

const [page_path, screenshot, term = "main"] = process.argv.slice(2);
if (!page_path || !screenshot) {
  console.error("usage: node check-page.js PAGE.html SCREENSHOT.png");
  process.exit(2);
}

// Runs in the page (puppeteer sends this function alone, so helpers live inside it).
function readPage() {
  // Reads one chart in the page: its SVG's plot geometry (data attributes the page sets), every
  // series path as points, and the peak marks.
  function readChart(key) {
    const svg = document.getElementById(key + "-svg");
    if (!svg) return null;
    const num = (e, name) => Number(e.getAttribute(name));
    const paths = Array.from(svg.querySelectorAll("path.series")).map((p) => {
      const points = (p.getAttribute("d").match(/-?[\d.]+,-?[\d.]+/g) || []).map((xy) =>
        xy.split(",").map(Number));
      const box = p.getBBox();
      return { series: p.getAttribute("data-series"), points, width: box.width, height: box.height };
    });
    const peaks = Array.from(svg.querySelectorAll("circle.peak")).map((c) => ({
      series: c.getAttribute("data-series"),
      bytes: num(c, "data-bytes"),
      at_ns: num(c, "data-at-ns"),
      cx: num(c, "cx"),
      cy: num(c, "cy"),
    }));
    const label = document.getElementById(key + "-peak-label");
    const rect = svg.getBoundingClientRect();
    return {
      plot: {
        left: num(svg, "data-plot-left"),
        right: num(svg, "data-plot-right"),
        top: num(svg, "data-plot-top"),
        bottom: num(svg, "data-plot-bottom"),
        end_ns: num(svg, "data-end-ns"),
        y_max: num(svg, "data-y-max"),
      },
      rendered_width: rect.width,
      rendered_height: rect.height,
      paths,
      peaks,
      label: label && {
        text: label.textContent,
        bytes: num(label, "data-bytes"),
        at_ns: num(label, "data-at-ns"),
      },
    };
  }

  const summary = {};
  document.querySelectorAll(".summary li").forEach((li) => {
    summary[li.id.replace(/^summary-/, "")] = li.textContent;
  });
  const table = document.getElementById("process-tree");
  const header = table ? Array.from(table.querySelectorAll("thead th")).map((th) => th.textContent) : [];
  const rows = table ? Array.from(table.querySelectorAll("tbody tr")).map((tr) => {
    const data = {};
    for (const a of tr.attributes) if (a.name.startsWith("data-")) data[a.name.slice(5)] = a.value;
    return { data, cells: Array.from(tr.cells).map((td) => td.textContent.replace(/\u00a0/g, " ")) };
  }) : [];
  const section = document.getElementById("flames");
  return {
    drawn: document.documentElement.getAttribute("data-drawn") === "true",
    scope: document.documentElement.getAttribute("data-scope"),
    summary,
    charts: { heap: readChart("heap"), resident: readChart("resident") },
    tree: { header, rows },
    flames_section_width: section ? section.clientWidth : null,
    flames: Array.from(document.querySelectorAll("iframe.flame")).map((f) => ({
      title: f.getAttribute("title"),
      width: f.getBoundingClientRect().width,
      height: f.getBoundingClientRect().height,
    })),
  };
}

// One flame graph, inside its iframe: the SVG's width, its frames, the details line after a
// real mouse hover on the widest frame under the root, and what a search for `term` matched.
async function readFlame(frame, page, term) {
  const svg = await frame.$("svg");
  if (!svg) return { svg: false };
  const info = await frame.evaluate(() => {
    const svg = document.querySelector("svg");
    const frames = document.getElementById("frames");
    const gs = frames ? Array.from(frames.querySelectorAll("g")) : [];
    return {
      svg_width: svg.getBoundingClientRect().width,
      svg_height: svg.getBoundingClientRect().height,
      body_width: document.body ? document.body.clientWidth : null,
      frames: gs.length,
      details: (document.getElementById("details") || {}).textContent || "",
      names: gs.map((g) => (g.querySelector("title") || {}).textContent || ""),
      widths: gs.map((g) => g.querySelector("rect").getBoundingClientRect().width),
      scroll_width: document.documentElement.scrollWidth,
    };
  });
  if (info.frames === 0) return Object.assign({ svg: true }, info);
  // Hover the widest frame that is not the root "all" with the mouse.
  const rects = await frame.$$("#frames g rect");
  let index = 0;
  info.names.forEach((n, k) => {
    if (!n.startsWith("all (") && (index === 0 || info.widths[k] > info.widths[index])) index = k;
  });
  await rects[index].hover();
  info.hovered = info.names[index];
  info.hover_details = await frame.evaluate(() => document.getElementById("details").textContent);
  // Search: inferno's button asks with prompt(); answer it with `term`.
  const answer = (dialog) => dialog.accept(term);
  page.once("dialog", answer);
  const search = await frame.$("#search");
  if (search) {
    await search.click();
    await frame.waitForFunction(() => document.getElementById("matched").textContent.trim() !== "",
      { timeout: 5000 }).catch(() => {});
  }
  page.off("dialog", answer);
  info.search = await frame.evaluate(() => ({
    matched: document.getElementById("matched").textContent,
    highlighted: Array.from(document.querySelectorAll("#frames rect"))
      .filter((r) => r.getAttribute("fill") === "rgb(230,0,230)").length,
  }));
  info.svg = true;
  return info;
}

(async () => {
  const browser = await puppeteer.launch({
    executablePath: process.env.CHROMIUM || "/usr/bin/chromium",
    headless: true,
    // Tests run as root, where chromium's sandbox cannot start.
    args: ["--no-sandbox", "--disable-gpu", "--disable-dev-shm-usage"],
  });
  const problems = [];
  try {
    const page = await browser.newPage();
    await page.setViewport({ width: 1400, height: 900 });
    page.on("console", (m) => {
      if (m.type() === "error" || m.type() === "assert") problems.push("console " + m.type() + ": " + m.text());
    });
    page.on("pageerror", (e) => problems.push("uncaught exception: " + (e && e.message ? e.message : e)));
    page.on("requestfailed", (r) => problems.push("request failed: " + r.url()));
    const url = "file://" + path.resolve(page_path);
    // The page must need nothing but itself: any other request is a problem.
    page.on("request", (r) => {
      const u = r.url();
      if (u !== url && !u.startsWith("about:") && !u.startsWith("data:")) problems.push("request: " + u);
    });
    await page.goto(url, { waitUntil: "load" });
    await page.waitForFunction(() => document.documentElement.getAttribute("data-drawn") === "true",
      { timeout: 10000 }).catch(() => problems.push("the page never set data-drawn"));
    const result = await page.evaluate(readPage);
    const frames = page.frames().filter((f) => f !== page.mainFrame());
    result.flame_frames = [];
    for (const f of frames) result.flame_frames.push(await readFlame(f, page, term));
    await page.mouse.move(0, 0);
    await page.screenshot({ path: screenshot, fullPage: true });
    result.screenshot = path.resolve(screenshot);
    result.problems = problems;
    process.stdout.write(JSON.stringify(result) + "\n");
  } finally {
    await browser.close();
  }
})().catch((e) => {
  console.error("check-page: " + (e && e.stack ? e.stack : e));
  process.exit(1);
});
