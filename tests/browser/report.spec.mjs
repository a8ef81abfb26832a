// Browser test of attnprof's report.html: Debian's Chromium, driven by playwright-core, loads the page from
// file:// with the network closed and checks that it is whole.
//
//   node tests/browser/report.spec.mjs path/to/report.html [screenshot.png]
//
// Checks: no console errors or uncaught page errors; no request leaves the page (anything but file:// or
// data: is blocked and counted as a failure, as is any failed request); every chart container rendered an
// SVG with data marks of the kind its chart draws; the sections and tables are there. Saves a full-page
// screenshot. Exits 0 when every check passed, 1 otherwise, with one line per check.
import { chromium } from 'playwright-core';
import fs from 'node:fs';
import path from 'node:path';
import { pathToFileURL } from 'node:url';

const reportPath = path.resolve(process.argv[2] ?? 'report.html');
const shotPath = path.resolve(process.argv[3] ?? path.join(path.dirname(reportPath), 'report.png'));
const executablePath = process.env.CHROMIUM ?? '/usr/bin/chromium';

// The data marks each kind of chart must draw. Vega's SVG renderer puts each mark in a <g class="mark-<type>
// role-mark">; axes and legends use other roles (role-axis-label, role-legend-symbol), so they do not count.
const m = (type, el = 'path') => `g.mark-${type}.role-mark ${el}`;
const expectedMarks = {
  'compare': [m('rect'), m('rule', 'line')],               // bars and the roofline-floor ticks; the forwards' spread
  'compare-memory': [m('rect')],                           // peak memory and bytes moved per variant
  'time-by-op': [m('rect')],
  'bytes-by-op': [m('rect')],
  'sweep-time': [m('symbol'), m('line'), m('text', 'text')],  // measurements, fitted lines, exponent labels
  'sweep-memory': [m('symbol'), m('line'), m('text', 'text')],
  'sweep-rate': [m('symbol'), m('line'), m('rule', 'line')],  // a dot per measured point, joined; the peak's rule
  'roofline': [m('line'), m('symbol'), m('rule', 'line')], // ceilings, one point per op, the ridges
  'memory': [m('area'), m('line')],
  'changes': [m('rect')],                                  // one bar per (step, op)
  'timeline': [m('rect')],                                 // one bar per span of the first forward
};

const results = [];
function check(name, ok, detail = '') {
  results.push({ name, ok, detail });
  console.log(`${ok ? 'ok  ' : 'FAIL'} ${name}${detail ? ': ' + detail : ''}`);
}

if (!fs.existsSync(reportPath)) {
  console.error(`report.spec: ${reportPath} does not exist`);
  process.exit(1);
}

const browser = await chromium.launch({
  executablePath,
  headless: true,
  args: ['--headless', '--no-sandbox', '--disable-gpu', '--disable-quic', '--no-first-run',
         '--disable-background-networking', '--disable-component-update', '--disable-sync'],
});  // playwright gives the browser a fresh, empty profile directory of its own
let failed = false;
try {
  const context = await browser.newContext({ viewport: { width: 1100, height: 900 }, deviceScaleFactor: 1 });
  const page = await context.newPage();
  const consoleErrors = [], pageErrors = [], failedRequests = [], externalRequests = [], dialogs = [];
  page.on('dialog', (d) => { dialogs.push(d.message()); d.dismiss().catch(() => {}); });
  page.on('console', (m) => { if (m.type() === 'error') consoleErrors.push(m.text()); });
  page.on('pageerror', (e) => pageErrors.push(String(e)));
  page.on('requestfailed', (r) => failedRequests.push(`${r.url().slice(0, 120)} (${r.failure()?.errorText})`));
  // The page must not reach out: block and record anything that is not the file itself or inline data.
  await page.route('**/*', (route) => {
    const url = route.request().url();
    if (url.startsWith('file:') || url.startsWith('data:')) return route.continue();
    externalRequests.push(url);
    return route.abort();
  });

  const url = pathToFileURL(reportPath).href;
  await page.goto(url, { waitUntil: 'load' });
  // The bootstrap sets data-charts-done once every vegaEmbed promise settled.
  await page.waitForSelector('body[data-charts-done]', { timeout: 30000 }).catch(() => {});
  const done = await page.getAttribute('body', 'data-charts-done');
  check('charts finished rendering', done !== null, done === null ? 'data-charts-done never set' : `${done} charts`);

  const charts = await page.$$eval('div.chart', (els) => els.map((el) => ({
    id: el.id, kind: el.dataset.kind, rendered: el.dataset.rendered ?? null,
    svg: el.querySelectorAll('svg').length,
  })));
  check('page has charts', charts.length > 0, `${charts.length} chart containers`);
  for (const c of charts) {
    const want = expectedMarks[c.kind] ?? [`${m('rect')}, ${m('symbol')}, ${m('line')}`];
    const counts = [];
    for (const sel of want) counts.push(await page.$$eval(`#${c.id} svg`, (svgs, s) =>
      svgs.reduce((n, svg) => n + svg.querySelectorAll(s).length, 0), sel));
    const ok = c.rendered === 'ok' && c.svg > 0 && counts.every((n) => n > 0);
    check(`chart ${c.kind} rendered with data marks`, ok,
          `rendered=${c.rendered} svg=${c.svg} ` + want.map((s, i) => `${s}: ${counts[i]}`).join(', '));
  }

  // Exact counts where the page promises one mark per datum: a bar segment per (variant, op), a bar per
  // span of the timeline, a point per op on the roofline and a dot per measured point of the sweep's rate.
  const specs = await page.evaluate(() => JSON.parse(document.getElementById('attnprof-data').textContent).charts);
  for (const c of specs) {
    let want = null, sel = null;
    if (c.kind === 'time-by-op' || c.kind === 'bytes-by-op' || c.kind === 'changes' || c.kind === 'timeline' ||
        c.kind === 'flame' || c.kind === 'steps-inside') {
      want = c.spec.data.values.length; sel = m('rect');
    }
    if (c.kind === 'roofline' && c.spec.layer.length > 1) {  // the points: the last layer, drawn over the lines
      want = c.spec.layer[c.spec.layer.length - 1].data.values.length; sel = m('symbol');
    }
    if (c.kind === 'sweep-rate') { want = c.spec.layer[1].data.values.length; sel = m('symbol'); }  // the dots, over their line
    // A point per group of tiles, over their line.
    if (c.kind === 'tiles-inside') { want = c.spec.data.values.length; sel = m('symbol'); }
    if (c.kind === 'compare-memory') {
      // Bars on a log axis: each must be drawn with a length (a bar from zero has none there).
      const wide = await page.$$eval(`#${c.id} svg ${m('rect')}`, (els) => els.filter((e) => e.getBBox().width > 1).length);
      check(`chart ${c.kind}: every bar drawn with a length`, wide === c.spec.data.values.length,
            `${wide} bars for ${c.spec.data.values.length} data rows`);
      continue;
    }
    if (want === null) continue;
    const got = await page.$$eval(`#${c.id} svg ${sel}`, (els) => els.length);
    check(`chart ${c.kind}: one mark per datum`, got === want, `${got} marks for ${want} data rows`);
  }

  const sections = await page.$$eval('main section', (els) => els.map((e) => e.id));
  check('sections present', sections.length > 0, sections.join(', '));
  // compare.json present: its table has a row per variant (without it the section is a note).
  if (await page.$('section#compare table.data')) {
    const rows = await page.$$eval('section#compare table.data tbody tr', (r) => r.length);
    check('comparison table has rows', rows > 0, `${rows} rows`);
  }
  // The profiler tables sort on a click: by each numeric column descending, then ascending on a second click,
  // figures a row lacks last either way; by name as text.
  const sortable = await page.$$('section#tables table.sortable');
  if (sortable.length > 0) {
    const t = sortable[0];
    const heads = await t.$$eval('thead th', (hs) => hs.map((h) => h.textContent));
    const order = (col) => t.$$eval('tbody tr', (rs, c) => rs.map((r) => r.cells[c].getAttribute('data-v')), col);
    const sorted = (vs, desc) => {
      const got = vs.filter((v) => v !== '').map(Number);
      const tail = vs.slice(got.length);
      return tail.every((v) => v === '') && got.every((v, i) => i === 0 || (desc ? got[i - 1] >= v : got[i - 1] <= v));
    };
    let ok = true, detail = `${sortable.length} tables; `;
    const textCols = await t.$$eval('thead th', (hs) => hs.map((h) => h.getAttribute('data-sort') === 'text'));
    for (let col = 1; col < heads.length; ++col) {
      if (textCols[col]) continue;  // names and shapes: sorted as text, checked on the first column below
      const th = (await t.$$('thead th'))[col];
      await th.click();
      const desc = await order(col);
      await th.click();
      const asc = await order(col);
      if (!sorted(desc, true) || !sorted(asc, false)) { ok = false; detail += `${heads[col]}: ${desc} / ${asc}; `; }
    }
    const names = async () => t.$$eval('tbody tr', (rs) => rs.map((r) => r.cells[0].textContent));
    await (await t.$$('thead th'))[0].click();
    const az = await names();
    await (await t.$$('thead th'))[0].click();
    const za = await names();
    const byName = [...az].sort((a, b) => a.localeCompare(b));
    if (az.join('|') !== byName.join('|') || za.join('|') !== [...byName].reverse().join('|')) {
      ok = false;
      detail += `names: ${az.join(',')} / ${za.join(',')}`;
    }
    check('profiler tables sort by every column', ok, detail + `${heads.length} columns`);
  }
  const data = await page.evaluate(() => JSON.parse(document.getElementById('attnprof-data').textContent).charts.length);
  check('every chart in the data block has a container', data === charts.length, `${data} specs, ${charts.length} containers`);

  // Names from the run cannot add elements: the page is built from its own elements only (the data block,
  // three libraries and the bootstrap script; no images, frames or objects), and nothing raised a dialog.
  const scripts = await page.$$eval('script', (els) => els.length);
  check('only the page\'s own scripts', scripts === 5, `${scripts} <script> elements`);
  const foreign = await page.$$eval('img, iframe, object, embed, link', (els) => els.map((e) => e.tagName));
  check('no injected elements', foreign.length === 0, foreign.join(', '));
  check('no dialogs', dialogs.length === 0, dialogs.join(' | '));
  check('no console errors', consoleErrors.length === 0, consoleErrors.join(' | ').slice(0, 500));
  check('no uncaught page errors', pageErrors.length === 0, pageErrors.join(' | ').slice(0, 500));
  check('no failed requests', failedRequests.length === 0, failedRequests.join(' | ').slice(0, 500));
  check('no network requests', externalRequests.length === 0, externalRequests.join(' | ').slice(0, 500));

  // ATTNPROF_SHOT_UNTIL=<section id>: the screenshot stops at the end of that section (docs/report-screenshot.png
  // is taken with ATTNPROF_SHOT_UNTIL=memory); otherwise the whole page.
  const until = process.env.ATTNPROF_SHOT_UNTIL;
  await page.evaluate(() => window.scrollTo(0, 0));  // the sort checks scrolled to the tables; boxes are from the top
  const box = until ? await page.locator(`section#${until}`).boundingBox() : null;
  if (box) await page.screenshot({ path: shotPath, fullPage: true, clip: { x: 0, y: 0, width: 1100, height: Math.ceil(box.y + box.height + 16) } });
  else await page.screenshot({ path: shotPath, fullPage: true });
  check('screenshot saved', fs.existsSync(shotPath) && fs.statSync(shotPath).size > 10000, shotPath);
} catch (e) {
  check('browser session', false, String(e));
} finally {
  await browser.close();
}
const nfail = results.filter((r) => !r.ok).length;
console.log(`${results.length - nfail} passed, ${nfail} failed`);
failed = nfail > 0;
process.exit(failed ? 1 : 0);
