// Hourglass web console. Everything it shows comes from read-only MongoDB commands sent to
// /console/api/command as Extended JSON (see crates/http/src/console_api.rs); the bucket
// statistics from /console/api/summary. The chart is downsampled by the server: one
// aggregate groups the series by $dateTrunc into about as many bins as the chart is wide.
//
// URL parameters preselect what to show (and are rewritten after each plot, so a chart can be
// shared as a link): db, coll, by (the meta path, e.g. tags.hostname), meta (the value's
// label: a string as is, anything else as JSON), field (repeatable, or comma-separated),
// from and to (ISO 8601, UTC when no zone is given, or milliseconds since the epoch).
// After each plot #chart-summary carries data-points, data-min, data-max, data-unit,
// data-bin-size, data-from and data-to (ms), data-width (px), and one span[data-field] per
// field.
'use strict';

(function () {
  const $ = (id) => document.getElementById(id);
  const params = new URLSearchParams(location.search);
  const MAX_LISTED = 500;
  const CHART_HEIGHT = 300;
  const COLORS = ['#1a5fb4', '#c01c28', '#26a269', '#e66100', '#613583', '#865e3c', '#0e7c86'];
  // $dateTrunc units and bin sizes, finest first, with each unit's length in ms (a month and
  // a year by their average lengths: only used to pick the bin).
  const BINS = [
    ['millisecond', 1, [1, 2, 5, 10, 20, 50, 100, 200, 500]],
    ['second', 1e3, [1, 2, 5, 10, 15, 30]],
    ['minute', 6e4, [1, 2, 5, 10, 15, 30]],
    ['hour', 36e5, [1, 2, 3, 6, 12]],
    ['day', 864e5, [1, 2, 7, 14]],
    ['month', 2629746e3, [1, 3, 6]],
    ['year', 31556952e3, [1, 2, 5, 10, 20, 50, 100, 200, 500, 1000]],
  ];

  const st = {
    collections: new Map(), // "db.coll" -> listCollections entry
    db: null, coll: null, timeField: null, metaField: null,
    metaPath: null, metaDocs: [], values: [], chart: null, firstSetup: true,
  };

  // ---- API ----------------------------------------------------------------------------

  async function call(url, init) {
    const resp = await fetch(url, Object.assign({credentials: 'same-origin'}, init));
    let reply;
    try {
      reply = await resp.json();
    } catch (e) {
      throw new Error(`${url}: HTTP ${resp.status}`);
    }
    if (reply.ok !== 1) {
      const code = reply.codeName ? ` (${reply.codeName})` : '';
      throw new Error(`${reply.errmsg || 'HTTP ' + resp.status}${code}`);
    }
    return reply;
  }

  function api(command) {
    return call('/console/api/command', {
      method: 'POST',
      headers: {'Content-Type': 'application/json'},
      body: JSON.stringify(command),
    }).catch((e) => { throw new Error(`${Object.keys(command)[0]}: ${e.message}`); });
  }

  const isZero = (id) => id === 0 || (id && id.$numberLong === '0');

  // Every document of a cursor reply, following it with getMore.
  async function drain(db, reply) {
    const c = reply.cursor;
    const docs = c.firstBatch.slice();
    const coll = c.ns.slice(c.ns.indexOf('.') + 1);
    let id = c.id;
    while (!isZero(id)) {
      const more = await api({getMore: id, collection: coll, $db: db});
      docs.push(...more.cursor.nextBatch);
      id = more.cursor.id;
    }
    return docs;
  }

  // ---- Extended JSON values ------------------------------------------------------------

  function num(v) {
    if (typeof v === 'number') return v;
    if (v && typeof v === 'object') {
      for (const k of ['$numberDouble', '$numberLong', '$numberInt', '$numberDecimal']) {
        if (k in v) return Number(v[k]);
      }
    }
    return null;
  }

  function dateMs(v) {
    const d = v && v.$date;
    if (typeof d === 'string') return Date.parse(d);
    if (typeof d === 'number') return d;
    if (d && d.$numberLong !== undefined) return Number(d.$numberLong);
    return null;
  }

  const ejsonDate = (ms) => ({$date: {$numberLong: String(Math.round(ms))}});
  const isDoc = (v) => v !== null && typeof v === 'object' && !Array.isArray(v) &&
    !Object.keys(v).some((k) => k.startsWith('$'));
  const label = (v) => (typeof v === 'string' ? v : JSON.stringify(v));

  function parseTime(s) {
    if (!s) return null;
    if (/^-?\d+$/.test(s)) return Number(s);
    const zoned = /(Z|[+-]\d\d:?\d\d)$/i.test(s) ? s : s + 'Z';
    const ms = Date.parse(zoned);
    return Number.isNaN(ms) ? null : ms;
  }

  const toInput = (ms) => new Date(ms).toISOString().slice(0, 23);

  function fmt(x, digits) {
    if (x === null || x === undefined || Number.isNaN(x)) return '—';
    if (Number.isInteger(x)) return x.toLocaleString('en-US');
    return x.toLocaleString('en-US', {maximumFractionDigits: digits === undefined ? 2 : digits});
  }

  // ---- page helpers -------------------------------------------------------------------

  function el(tag, props, ...children) {
    const e = document.createElement(tag);
    Object.assign(e, props || {});
    e.append(...children);
    return e;
  }

  function showError(e) {
    console.error(e);
    const box = $('error');
    box.textContent = e && e.message ? e.message : String(e);
    box.hidden = false;
    document.body.dataset.consoleError = box.textContent;
  }

  function clearError() {
    $('error').hidden = true;
    delete document.body.dataset.consoleError;
  }

  function fillTable(table, rows) {
    table.tBodies[0].replaceChildren(...rows.map(([k, v]) =>
      el('tr', {}, el('th', {scope: 'row', textContent: k}), el('td', {textContent: v}))));
  }

  // ---- databases and collections --------------------------------------------------------

  async function loadDatabases() {
    const r = await api({listDatabases: 1, nameOnly: true, authorizedDatabases: true, $db: 'admin'});
    const names = r.databases.map((d) => d.name).sort();
    const list = $('database-list');
    list.replaceChildren();
    for (const db of names) {
      const sub = el('ul');
      list.append(el('li', {}, el('div', {className: 'db', textContent: db}), sub));
      try {
        const colls = await drain(db, await api({listCollections: 1, $db: db}));
        colls.sort((a, b) => a.name.localeCompare(b.name));
        for (const c of colls) {
          if (c.name.startsWith('system.')) continue;
          st.collections.set(`${db}.${c.name}`, c);
          const ts = c.type === 'timeseries';
          const b = el('button', {type: 'button', textContent: c.name, disabled: !ts});
          b.dataset.ns = `${db}.${c.name}`;
          b.addEventListener('click', () => selectCollection(db, c.name).catch(showError));
          sub.append(el('li', {}, b, el('span', {className: 'kind', textContent: c.type})));
        }
      } catch (e) {
        sub.append(el('li', {className: 'muted', textContent: e.message}));
      }
    }
    $('databases-status').textContent = names.length ? '' : 'No databases.';
  }

  async function selectCollection(db, coll) {
    clearError();
    const info = st.collections.get(`${db}.${coll}`);
    if (!info || info.type !== 'timeseries') {
      throw new Error(`${db}.${coll} is not a time-series collection`);
    }
    for (const b of document.querySelectorAll('nav button')) {
      b.classList.toggle('selected', b.dataset.ns === `${db}.${coll}`);
    }
    const ts = info.options.timeseries;
    Object.assign(st, {db, coll, timeField: ts.timeField, metaField: ts.metaField || null});
    $('collection-name').textContent = `${db}.${coll}`;
    const opts = [['timeField', ts.timeField], ['metaField', ts.metaField || '(none)']];
    for (const k of ['granularity', 'bucketMaxSpanSeconds', 'bucketRoundingSeconds']) {
      if (ts[k] !== undefined) opts.push([k, String(ts[k])]);
    }
    if (info.options.expireAfterSeconds !== undefined) {
      opts.push(['expireAfterSeconds', String(info.options.expireAfterSeconds)]);
    }
    fillTable($('collection-options'), opts);
    fillTable($('collection-stats'), [['', 'loading…']]);
    $('collection').hidden = false;
    await Promise.all([loadStats(db, coll), setupBrowser()]);
  }

  async function loadStats(db, coll) {
    const q = new URLSearchParams({db, coll});
    const s = await call(`/console/api/summary?${q}`);
    const ts = s.collStats.timeseries || {};
    const n = num(s.measurements);
    const buckets = num(s.bucketCount);
    const rows = [
      ['buckets', fmt(buckets)],
      ['measurements', fmt(n)],
      ['per bucket', fmt(n / buckets, 1)],
      ['bucket bytes', fmt(num(s.bucketBytes))],
      ['avgBucketSize', fmt(num(ts.avgBucketSize))],
      ['bytes per measurement', fmt(num(s.bytesPerMeasurement))],
      ['compression ratio', s.compressionRatio === undefined ? '—'
        : `${fmt(num(s.compressionRatio), 1)} : 1`],
      ['BSON per measurement', `${fmt(num(s.avgMeasurementBsonSize), 1)} ` +
        `(${fmt(num(s.sampleSize))} sampled)`],
      ['storageSize', fmt(num(s.collStats.storageSize))],
    ];
    const archive = s.collStats.archive;
    if (archive) {
      rows.push(
        ['archived files', fmt(num(archive.files))],
        ['archived bytes', fmt(num(archive.bytes))],
        ['archived measurements', fmt(num(archive.measurements))],
        ['archive bytes per measurement',
          fmt(num(archive.bytes) / num(archive.measurements), 1)],
        ['archive last run', archive.lastRun ? String(archive.lastRun.$date || archive.lastRun) : '—'],
      );
    }
    const counters = Object.entries(ts)
      .filter(([k]) => !['bucketsNs', 'bucketCount', 'avgBucketSize'].includes(k))
      .map(([k, v]) => [k, fmt(num(v))]);
    fillTable($('catalog-counters'), counters);
    fillTable($('collection-stats'), rows);
  }

  // ---- series browser -------------------------------------------------------------------

  async function setupBrowser() {
    const {db, coll, metaField} = st;
    const first = st.firstSetup && params.get('db') === db && params.get('coll') === coll;
    st.firstSetup = false;
    $('browser').hidden = false;
    $('meta-picker').hidden = !metaField;
    const pathSel = $('meta-path');
    pathSel.replaceChildren();
    st.metaPath = null;
    if (metaField) {
      const r = await api({distinct: coll, key: metaField, $db: db});
      st.metaDocs = r.values;
      const paths = [metaField];
      const keys = new Map(); // sub-key -> distinct labels seen
      for (const v of r.values.filter(isDoc)) {
        for (const [k, x] of Object.entries(v)) {
          if (!keys.has(k)) keys.set(k, new Set());
          keys.get(k).add(label(x));
        }
      }
      let best = metaField;
      let most = 0;
      for (const [k, seen] of keys) {
        paths.push(`${metaField}.${k}`);
        if (seen.size > most) [best, most] = [`${metaField}.${k}`, seen.size];
      }
      for (const p of paths) pathSel.append(el('option', {value: p, textContent: p}));
      const wanted = first && params.get('by');
      pathSel.value = wanted && paths.includes(wanted) ? wanted : best;
      await loadValues(first ? params.get('meta') : null);
    }
    await loadFields(first ? params.getAll('field').flatMap((f) => f.split(',')) : []);
    await setRange(first ? parseTime(params.get('from')) : null,
      first ? parseTime(params.get('to')) : null);
    await plot();
  }

  async function loadValues(wanted) {
    const path = $('meta-path').value;
    st.metaPath = path;
    const values = path === st.metaField ? st.metaDocs
      : (await api({distinct: st.coll, key: path, $db: st.db})).values;
    st.values = values.map((v) => ({value: v, label: label(v)}))
      .sort((a, b) => a.label.localeCompare(b.label, 'en', {numeric: true}));
    if (wanted !== null && wanted !== undefined) $('meta-search').value = '';
    renderValues(wanted);
  }

  function renderValues(wanted) {
    const sel = $('meta-value');
    const previous = wanted === null || wanted === undefined ? sel.value : wanted;
    const text = $('meta-search').value.trim().toLowerCase();
    const matching = st.values.filter((v) => v.label.toLowerCase().includes(text));
    const shown = matching.slice(0, MAX_LISTED);
    sel.replaceChildren(...shown.map((v) => el('option', {value: v.label, textContent: v.label})));
    if (!shown.some((v) => v.label === previous) && previous && text === '') {
      const found = st.values.find((v) => v.label === previous);
      if (found) sel.append(el('option', {value: found.label, textContent: found.label}));
    }
    sel.value = previous;
    if (sel.selectedIndex < 0 && sel.options.length) sel.selectedIndex = 0;
    $('meta-count').textContent = matching.length > shown.length
      ? `showing ${shown.length} of ${matching.length} (of ${st.values.length})`
      : `${matching.length} of ${st.values.length} values`;
  }

  function metaFilter() {
    if (!st.metaPath) return {};
    const found = st.values.find((v) => v.label === $('meta-value').value);
    return found ? {[st.metaPath]: found.value} : {};
  }

  async function loadFields(wanted) {
    const r = await api({find: st.coll, filter: metaFilter(), limit: 200, batchSize: 200, singleBatch: true, $db: st.db});
    const names = [];
    for (const d of r.cursor.firstBatch) {
      for (const [k, v] of Object.entries(d)) {
        if (k === '_id' || k === st.timeField || k === st.metaField || k.startsWith('$')) continue;
        if (num(v) !== null && !names.includes(k)) names.push(k);
      }
    }
    const keep = wanted.length ? wanted.filter((f) => names.includes(f)) : names.slice(0, 1);
    $('fields').replaceChildren(...names.map((f) => {
      const box = el('input', {type: 'checkbox', value: f, checked: keep.includes(f)});
      return el('label', {}, box, ' ' + f);
    }));
    if (!names.length) $('fields').append(el('span', {className: 'muted', textContent: 'no numeric fields'}));
  }

  async function setRange(from, to) {
    if (from === null || to === null) {
      const time = '$' + st.timeField;
      const r = await api({aggregate: st.coll, pipeline: [{$match: metaFilter()},
        {$group: {_id: null, min: {$min: time}, max: {$max: time}}}], cursor: {}, $db: st.db});
      const ext = r.cursor.firstBatch[0];
      if (ext) {
        if (from === null) from = dateMs(ext.min);
        if (to === null) to = dateMs(ext.max);
      }
    }
    if (from !== null) $('from').value = toInput(from);
    if (to !== null) $('to').value = toInput(to);
  }

  // The smallest $dateTrunc bin at least `msPerPixel` long.
  function pickBin(msPerPixel) {
    for (const [unit, ms, sizes] of BINS) {
      for (const n of sizes) if (ms * n >= msPerPixel) return {unit, binSize: n};
    }
    return {unit: 'year', binSize: 1000};
  }

  async function plot() {
    const fields = [...document.querySelectorAll('#fields input:checked')].map((b) => b.value);
    const from = parseTime($('from').value);
    const to = parseTime($('to').value);
    const status = $('chart-status');
    if (!fields.length) { status.textContent = 'Pick at least one field.'; return; }
    if (from === null || to === null || to < from) { status.textContent = 'Pick a time range.'; return; }
    const box = $('chart');
    const width = Math.max(300, box.clientWidth || 800);
    const {unit, binSize} = pickBin(Math.max(1, to - from) / width);
    const time = '$' + st.timeField;
    const match = Object.assign(metaFilter(),
      {[st.timeField]: {$gte: ejsonDate(from), $lte: ejsonDate(to)}});
    const group = {_id: {$dateTrunc: {date: time, unit, binSize}}};
    fields.forEach((f, i) => {
      group[`avg${i}`] = {$avg: '$' + f};
      group[`min${i}`] = {$min: '$' + f};
      group[`max${i}`] = {$max: '$' + f};
    });
    const pipeline = [{$match: match}, {$group: group}, {$sort: {_id: 1}}];
    status.textContent = 'Loading…';
    const started = performance.now();
    const rows = await drain(st.db, await api({aggregate: st.coll, pipeline,
      cursor: {batchSize: 5000}, maxTimeMS: 60000, $db: st.db}));
    const took = Math.round(performance.now() - started);
    const data = [rows.map((r) => dateMs(r._id) / 1000)];
    const series = [{}];
    const bands = [];
    fields.forEach((f, i) => {
      const c = COLORS[i % COLORS.length];
      data.push(rows.map((r) => num(r[`avg${i}`])), rows.map((r) => num(r[`min${i}`])),
        rows.map((r) => num(r[`max${i}`])));
      series.push({label: `${f} avg`, stroke: c, width: 1.5},
        {label: `${f} min`, stroke: c + '66', width: 0.5},
        {label: `${f} max`, stroke: c + '66', width: 0.5});
      bands.push({series: [3 * i + 3, 3 * i + 2], fill: c + '22'});
    });
    if (st.chart) st.chart.destroy();
    st.chart = new uPlot({
      width, height: CHART_HEIGHT, series, bands,
      scales: {x: {time: true}},
      tzDate: (ts) => uPlot.tzDate(new Date(ts * 1e3), 'Etc/UTC'),
      legend: {live: true},
    }, data, box);
    writeSummary(fields, data, {unit, binSize, from, to, width});
    status.textContent = `${rows.length} points (${binSize} ${unit} bins, server-side ` +
      `$dateTrunc/$group) in ${took} ms; times in UTC.`;
    const link = new URLSearchParams({db: st.db, coll: st.coll});
    if (st.metaPath) { link.set('by', st.metaPath); link.set('meta', $('meta-value').value); }
    fields.forEach((f) => link.append('field', f));
    link.set('from', new Date(from).toISOString());
    link.set('to', new Date(to).toISOString());
    history.replaceState(null, '', `?${link}`);
  }

  // What the chart holds, machine-readable (tests read it from the DOM).
  function writeSummary(fields, data, bin) {
    const s = $('chart-summary');
    const spans = [];
    let lo = Infinity;
    let hi = -Infinity;
    fields.forEach((f, i) => {
      const mins = data[3 * i + 2].filter((x) => x !== null);
      const maxs = data[3 * i + 3].filter((x) => x !== null);
      const fmin = mins.length ? Math.min(...mins) : null;
      const fmax = maxs.length ? Math.max(...maxs) : null;
      if (fmin !== null) lo = Math.min(lo, fmin);
      if (fmax !== null) hi = Math.max(hi, fmax);
      const span = el('span', {textContent: `${f}: min ${fmt(fmin, 4)}, max ${fmt(fmax, 4)}. `});
      Object.assign(span.dataset, {field: f, min: fmin ?? '', max: fmax ?? ''});
      spans.push(span);
    });
    s.replaceChildren(...spans);
    Object.assign(s.dataset, {
      points: data[0].length, fields: fields.join(','),
      min: lo === Infinity ? '' : lo, max: hi === -Infinity ? '' : hi,
      unit: bin.unit, binSize: bin.binSize, from: bin.from, to: bin.to, width: bin.width,
      metaPath: st.metaPath || '', meta: st.metaPath ? $('meta-value').value : '',
    });
    s.hidden = false;
  }

  // ---- wiring --------------------------------------------------------------------------

  function wire() {
    const replot = () => { clearError(); plot().catch(showError); };
    $('series-form').addEventListener('submit', (e) => { e.preventDefault(); replot(); });
    $('meta-path').addEventListener('change', () => {
      $('meta-search').value = '';
      loadValues(null).then(plot).catch(showError);
    });
    $('meta-search').addEventListener('input', () => renderValues(null));
    $('meta-value').addEventListener('change', replot);
    $('fields').addEventListener('change', replot);
    window.addEventListener('resize', () => {
      if (st.chart) st.chart.setSize({width: Math.max(300, $('chart').clientWidth), height: CHART_HEIGHT});
    });
  }

  async function main() {
    wire();
    try {
      const info = await api({buildInfo: 1, $db: 'admin'});
      $('server-version').textContent = `version ${info.version}`;
      await loadDatabases();
      const db = params.get('db');
      const coll = params.get('coll');
      if (db && coll) await selectCollection(db, coll);
      document.body.dataset.consoleState = 'ready';
    } catch (e) {
      showError(e);
      document.body.dataset.consoleState = 'error';
    }
  }

  main();
})();
