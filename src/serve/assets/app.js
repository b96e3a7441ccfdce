// memq serve: the browser front end. Plain ES2020, no library, no build step; every request
// goes to the server that sent this file, with its session cookie (credentials: same-origin).
// For tests: document.body.dataset.ready = "1" once /api/info and the first timeline are drawn;
// dataset.timelineRequests / momentRequests / blockRequests / sqlRequests count the responses
// drawn so far.
'use strict';
(function () {
  const doc = document;
  const body = doc.body;
  const $ = (id) => doc.getElementById(id);

  // ------------------------------------------------------------------ small helpers

  /** An element: h('td', {class: 'num', text: '3'}, child, ...). Never parses HTML. */
  function h(tag, props, ...kids) {
    const e = doc.createElement(tag);
    if (props) {
      for (const [k, v] of Object.entries(props)) {
        if (v == null || v === false) continue;
        if (k === 'class') e.className = v;
        else if (k === 'text') e.textContent = v;
        else if (k.startsWith('on')) e.addEventListener(k.slice(2), v);
        else e.setAttribute(k, v === true ? '' : String(v));
      }
    }
    for (const k of kids.flat()) {
      if (k != null && k !== false) e.append(k instanceof Node ? k : String(k));
    }
    return e;
  }

  const BYTE_UNITS = ['B', 'KiB', 'MiB', 'GiB', 'TiB', 'PiB', 'EiB'];
  /** 1536 → "1.50 KiB"; below 1 KiB whole bytes. */
  function fmtBytes(n) {
    if (n == null || n === '' || !Number.isFinite(Number(n))) return '–';
    n = Number(n);
    const sign = n < 0 ? '-' : '';
    let v = Math.abs(n);
    if (v < 1024) return sign + (Number.isInteger(v) ? v : v.toFixed(2)) + ' B';
    let i = 0;
    while (v >= 1024 && i < BYTE_UNITS.length - 1) { v /= 1024; i++; }
    return sign + v.toFixed(2) + ' ' + BYTE_UNITS[i];
  }
  /** A duration in ns, human: "850 ns", "12.34 µs", "3.21 ms", "1.234 s", "2 min 3.4 s". */
  function fmtDur(ns) {
    if (ns == null || !Number.isFinite(ns)) return '–';
    const s = ns < 0 ? '-' : '';
    const a = Math.abs(ns);
    if (a === 0) return '0 s';
    if (a < 1e3) return s + Math.round(a) + ' ns';
    if (a < 1e6) return s + (a / 1e3).toFixed(2) + ' µs';
    if (a < 1e9) return s + (a / 1e6).toFixed(2) + ' ms';
    if (a < 60e9) return s + (a / 1e9).toFixed(3) + ' s';
    if (a < 3600e9) {
      const m = Math.floor(a / 60e9);
      return s + m + ' min ' + ((a - m * 60e9) / 1e9).toFixed(1) + ' s';
    }
    const hh = Math.floor(a / 3600e9);
    return s + hh + ' h ' + Math.floor((a - hh * 3600e9) / 60e9) + ' min';
  }
  function fmtInt(n) { return Number(n).toLocaleString('en-US', { maximumFractionDigits: 0 }); }
  function fmtNum(n) {
    if (n == null || !Number.isFinite(Number(n))) return '–';
    n = Number(n);
    return Math.abs(n) >= 1e15 ? n.toExponential(3) : n.toLocaleString('en-US', { maximumFractionDigits: 3 });
  }
  /** An x of a series, relative to its start: "+1.234 s" or "entry 1,234". */
  function fmtX(series, x) {
    if (x == null || !Number.isFinite(x)) return '–';
    return series && series.x === 'entry' ? 'entry ' + fmtInt(Math.round(x)) : '+' + fmtDur(x);
  }
  /** Wall-clock time of a relative x of a time series ("" when the origin is not an epoch). */
  function fmtWall(series, x) {
    if (!series || series.x !== 'time' || !(Number(series.start) > 1e15)) return '';
    const d = new Date((Number(series.start) + x) / 1e6);
    return Number.isNaN(d.getTime()) ? '' : d.toISOString().replace('T', ' ').replace('Z', ' UTC');
  }
  function pct(part, whole) { return whole > 0 ? (100 * part / whole).toFixed(1) + ' %' : ''; }
  function clamp(v, lo, hi) { return Math.min(hi, Math.max(lo, v)); }
  function niceStep(raw) {
    if (!(raw > 0) || !Number.isFinite(raw)) return 1;
    const p = Math.pow(10, Math.floor(Math.log10(raw)));
    const f = raw / p;
    return (f <= 1 ? 1 : f <= 2 ? 2 : f <= 5 ? 5 : 10) * p;
  }
  function isAbort(e) { return e && (e.name === 'AbortError'); }

  // ------------------------------------------------------------------ API

  class ApiError extends Error {
    constructor(msg, status) { super(msg); this.status = status; }
  }
  /** fetch JSON from the server; throws ApiError with the server's {"error"} text. */
  async function api(path, opts = {}) {
    const init = { credentials: 'same-origin', signal: opts.signal, headers: { Accept: 'application/json' } };
    if (opts.body !== undefined) {
      init.method = 'POST';
      init.headers['Content-Type'] = 'application/json';
      init.body = JSON.stringify(opts.body);
    }
    const r = await fetch(path, init);
    let j = null;
    try { j = await r.json(); } catch (e) { if (isAbort(e)) throw e; j = null; }
    if (!r.ok) {
      let msg = (j && typeof j.error === 'string') ? j.error : `${r.status} ${r.statusText}`;
      if (r.status === 403 && !(j && j.error)) msg = 'forbidden: open the link that memq serve printed (with ?token=…)';
      throw new ApiError(msg, r.status);
    }
    if (j == null) throw new ApiError(`${path}: the server's answer is not JSON`, r.status);
    return j;
  }
  function qs(params) { return new URLSearchParams(params).toString(); }

  const counters = { timeline: 0, moment: 0, block: 0, sql: 0 };
  for (const k of Object.keys(counters)) body.dataset[k + 'Requests'] = '0';
  function bump(k) { counters[k]++; body.dataset[k + 'Requests'] = String(counters[k]); }

  function showError(e) {
    if (isAbort(e)) return;
    $('banner-text').textContent = (e && e.message) ? e.message : String(e);
    $('banner').hidden = false;
  }
  $('banner-close').addEventListener('click', () => { $('banner').hidden = true; });

  // ------------------------------------------------------------------ colours

  let COLORS = null;
  function colors() {
    if (!COLORS) {
      const cs = getComputedStyle(doc.documentElement);
      const v = (n) => cs.getPropertyValue(n).trim() || '#888';
      COLORS = {
        fg: v('--fg'), muted: v('--muted'), grid: v('--grid'), line: v('--line'), panel: v('--panel'),
        cursor: v('--cursor'), oom: v('--oom'), step: v('--step'),
        palette: [0, 1, 2, 3, 4, 5, 6, 7].map((i) => v('--c' + i)),
      };
    }
    return COLORS;
  }

  // ------------------------------------------------------------------ a canvas plot

  /** Axes, scales and device-pixel sizing for one canvas; layers are drawn by the callers. */
  class Plot {
    constructor(canvas) {
      this.c = canvas;
      this.ctx = canvas.getContext('2d');
      this.w = 0; this.h = 0; this.dpr = 1;
      this.m = { l: 76, r: 14, t: 16, b: 46 };
      this.x0 = 0; this.x1 = 1; this.y0 = 0; this.y1 = 1;
    }
    /** Fits the backing store to the CSS size × devicePixelRatio; true if it changed. */
    resize() {
      const r = this.c.getBoundingClientRect();
      const dpr = window.devicePixelRatio || 1;
      const w = Math.round(r.width), hh = Math.round(r.height);
      if (w === this.w && hh === this.h && dpr === this.dpr) return false;
      this.w = w; this.h = hh; this.dpr = dpr;
      this.c.width = Math.max(1, Math.round(w * dpr));
      this.c.height = Math.max(1, Math.round(hh * dpr));
      return true;
    }
    get visible() { return this.w > 20 && this.h > 20; }
    get iw() { return Math.max(10, this.w - this.m.l - this.m.r); }
    get ih() { return Math.max(10, this.h - this.m.t - this.m.b); }
    px(x) { return this.m.l + (x - this.x0) / (this.x1 - this.x0) * this.iw; }
    xAt(px) { return this.x0 + (px - this.m.l) / this.iw * (this.x1 - this.x0); }
    py(y) { return this.m.t + this.ih - (y - this.y0) / (this.y1 - this.y0) * this.ih; }
    inside(px, py) { return px >= this.m.l && px <= this.m.l + this.iw && py >= this.m.t && py <= this.m.t + this.ih; }
    begin() {
      const { ctx } = this;
      ctx.setTransform(this.dpr, 0, 0, this.dpr, 0, 0);
      ctx.clearRect(0, 0, this.w, this.h);
      ctx.font = '11px system-ui, -apple-system, "Segoe UI", Roboto, "DejaVu Sans", sans-serif';
    }
    /** y from 0 to a rounded ceiling above max; returns the tick step. */
    fitY(max, unit) {
      if (!(max > 0)) max = unit === 'bytes' ? 1024 : 1;
      const n = Math.max(2, Math.floor(this.ih / 48));
      let step;
      if (unit === 'bytes') {
        const raw = max * 1.04 / n;
        const k = clamp(Math.floor(Math.log(max) / Math.log(1024)), 0, 6);
        const u = Math.pow(1024, k);
        step = Math.max(1, niceStep(raw / u) * u);
      } else {
        step = niceStep(max * 1.04 / n);
      }
      this.y0 = 0;
      this.y1 = Math.ceil(max * 1.04 / step) * step;
      this.ystep = step;
      this.yk = unit === 'bytes' ? clamp(Math.floor(Math.log(Math.max(1, this.y1)) / Math.log(1024)), 0, 6) : 0;
    }
    /** Byte tick labels all in the unit of the top of the axis: "0.50 GiB", "1.00 GiB". */
    byteTicks() {
      const k = this.yk || 0, u = Math.pow(1024, k);
      return (v) => (v === 0 ? '0' : k === 0 ? String(Math.round(v)) : (v / u).toFixed(2)) + ' ' + BYTE_UNITS[k];
    }
    /** Grid and labels; xfmt(step) gives the label function for a tick step. */
    axes(xfmt, yfmt, minXStep) {
      const { ctx, m } = this;
      const c = colors();
      ctx.lineWidth = 1;
      // y
      ctx.strokeStyle = c.grid; ctx.fillStyle = c.muted;
      ctx.textAlign = 'right'; ctx.textBaseline = 'middle';
      ctx.beginPath();
      for (let i = 0, y = this.y0; y <= this.y1 + this.ystep * 1e-6 && i < 200; i++, y = this.y0 + i * this.ystep) {
        const Y = Math.round(this.py(y)) + 0.5;
        ctx.moveTo(m.l, Y); ctx.lineTo(m.l + this.iw, Y);
        ctx.fillText(yfmt(y), m.l - 6, Y);
      }
      ctx.stroke();
      // x
      const span = this.x1 - this.x0;
      let step = niceStep(span / Math.max(2, Math.floor(this.iw / 120)));
      if (minXStep) step = Math.max(step, minXStep);
      const f = xfmt(step);
      ctx.textAlign = 'center'; ctx.textBaseline = 'top';
      ctx.beginPath();
      const first = Math.ceil(this.x0 / step) * step;
      for (let i = 0, x = first; x <= this.x1 && i < 500; i++, x = first + i * step) {
        const X = Math.round(this.px(x)) + 0.5;
        ctx.moveTo(X, m.t); ctx.lineTo(X, m.t + this.ih);
        ctx.fillText(f(x), X, m.t + this.ih + 8);
      }
      ctx.stroke();
      ctx.strokeStyle = c.line;
      ctx.strokeRect(m.l + 0.5, m.t + 0.5, this.iw, this.ih);
    }
    clip() {
      const { ctx, m } = this;
      ctx.save();
      ctx.beginPath();
      ctx.rect(m.l, m.t - 1, this.iw, this.ih + 2);
      ctx.clip();
    }
    unclip() { this.ctx.restore(); }
    vline(x, color, dash, width) {
      const { ctx, m } = this;
      const X = Math.round(this.px(x)) + 0.5;
      ctx.save();
      ctx.strokeStyle = color; ctx.lineWidth = width || 1;
      ctx.setLineDash(dash || []);
      ctx.beginPath(); ctx.moveTo(X, m.t); ctx.lineTo(X, m.t + this.ih); ctx.stroke();
      ctx.restore();
      return X;
    }
  }

  /** Tick labels of a time axis (x in ns) for a tick step. */
  function timeTicks(step) {
    const units = [[1, 'ns'], [1e3, 'µs'], [1e6, 'ms'], [1e9, 's'], [60e9, 'min'], [3600e9, 'h']];
    let u = units[0];
    for (const c of units) if (step >= c[0]) u = c;
    const d = clamp(Math.ceil(-Math.log10(step / u[0]) - 1e-9), 0, 6);
    return (x) => (x / u[0]).toFixed(d) + ' ' + u[1];
  }
  function entryTicks() { return (x) => fmtInt(Math.round(x)); }

  /**
   * One metric of a /api/timeline answer: a light band min..max per bucket and the step line of
   * the last value, starting from `before` at the left edge. fx maps the answer's x to plot x.
   */
  function drawMetric(p, tl, metric, color, xEnd, fx) {
    const b = tl && tl.buckets;
    if (!b) return;
    const M = b.metrics && b.metrics[metric];
    fx = fx || ((x) => x);
    const ctx = p.ctx;
    const n = M ? Math.min(b.x0.length, M.last.length) : 0;
    if (M) {
      ctx.save();
      ctx.fillStyle = color; ctx.globalAlpha = 0.22;
      for (let i = 0; i < n; i++) {
        const lo = M.min[i], hi = M.max[i];
        if (lo == null || hi == null) continue;
        const xa = p.px(fx(b.x0[i])), xb = p.px(fx(b.x1[i]));
        const ya = p.py(hi), yb = p.py(lo);
        ctx.fillRect(xa, ya, Math.max(1, xb - xa), Math.max(1, yb - ya));
      }
      ctx.restore();
    }
    ctx.save();
    ctx.strokeStyle = color; ctx.lineWidth = 1.6; ctx.lineJoin = 'round';
    ctx.beginPath();
    let prev = tl.before ? tl.before[metric] : null;
    let started = false;
    if (prev != null) { ctx.moveTo(p.px(fx(tl.x0)), p.py(prev)); started = true; }
    for (let i = 0; i < n; i++) {
      const v = M.last[i];
      if (v == null) continue;
      const X = p.px(fx(b.x0[i]));
      if (started) ctx.lineTo(X, p.py(prev)); else { ctx.moveTo(X, p.py(v)); started = true; }
      ctx.lineTo(X, p.py(v));
      prev = v;
    }
    if (started && prev != null) {
      const end = Math.min(fx(tl.x1), xEnd == null ? Infinity : fx(xEnd));
      ctx.lineTo(p.px(end), p.py(prev));
    }
    ctx.stroke();
    ctx.restore();
  }

  /** The value of a metric at x in a timeline answer: {last, min, max} or null. */
  function valueAt(tl, metric, x) {
    if (!tl || !tl.buckets) return null;
    const b = tl.buckets, M = b.metrics && b.metrics[metric];
    const before = tl.before ? tl.before[metric] : null;
    if (!M) return before == null ? null : { last: before, min: before, max: before };
    // last bucket starting at or before x
    let lo = 0, hi = b.x0.length - 1, k = -1;
    while (lo <= hi) {
      const mid = (lo + hi) >> 1;
      if (b.x0[mid] <= x) { k = mid; lo = mid + 1; } else hi = mid - 1;
    }
    for (; k >= 0; k--) {
      if (M.last[k] == null) continue;
      if (x < b.x1[k]) return { last: M.last[k], min: M.min[k], max: M.max[k] };
      return { last: M.last[k], min: M.last[k], max: M.last[k] };
    }
    return before == null ? null : { last: before, min: before, max: before };
  }
  function maxIn(tl, metric, x0, x1) {
    let m = -Infinity;
    if (!tl || !tl.buckets) return m;
    const b = tl.buckets, M = b.metrics && b.metrics[metric];
    const before = tl.before ? tl.before[metric] : null;
    if (before != null) m = before;
    if (!M) return m;
    for (let i = 0; i < b.x0.length; i++) {
      if (b.x1[i] < x0 || b.x0[i] > x1) continue;
      const v = M.max[i] != null ? M.max[i] : M.last[i];
      if (v != null && v > m) m = v;
    }
    return m;
  }

  function placeTip(tip, wrap, X, Y) {
    tip.hidden = false;
    const W = wrap.clientWidth;
    const tw = tip.offsetWidth;
    tip.style.left = (X + 14 + tw > W ? Math.max(0, X - 14 - tw) : X + 14) + 'px';
    tip.style.top = Math.max(4, Y) + 'px';
  }
  function tipRow(color, name, value) {
    const left = h('span', null);
    if (color) { const i = h('i'); i.style.background = color; left.append(i); }
    left.append(name);
    return h('div', { class: 'row' }, left, h('span', { class: 'v', text: value }));
  }

  // ------------------------------------------------------------------ state and tabs

  const S = { info: null, tab: 'timeline', opened: {} };
  const TABS = { timeline: 'timeline', findings: 'findings', compare: 'compare', sql: 'sql-view' };

  function setTab(name, opts = {}) {
    if (!TABS[name]) name = 'timeline';
    S.tab = name;
    for (const [t, id] of Object.entries(TABS)) {
      $(id).hidden = t !== name;
      $('tab-' + t).setAttribute('aria-selected', String(t === name));
    }
    const first = !S.opened[name];
    S.opened[name] = true;
    if (name === 'timeline') { TL.layout(); }
    if (name === 'findings' && first) loadFindings();
    if (name === 'compare') { if (first) CMP.init(); else CMP.layout(); }
    if (name === 'sql') { SQL.open(); }
    if (!opts.keepHash) writeHash();
  }
  for (const t of Object.keys(TABS)) $('tab-' + t).addEventListener('click', () => setTab(t));

  function writeHash() {
    let hash = '#' + S.tab;
    if (S.tab === 'timeline' && TL.series) {
      const p = { series: TL.series.id };
      if (TL.momentX != null) p.x = String(Math.round(TL.momentX));
      hash += '?' + qs(p);
    }
    // the token stays out of the address bar: the session cookie carries the session
    history.replaceState(null, '', location.pathname + hash);
  }
  function readHash() {
    const m = /^#(\w+)(?:\?(.*))?$/.exec(location.hash || '');
    if (!m) return { tab: 'timeline' };
    const p = new URLSearchParams(m[2] || '');
    return { tab: m[1], series: p.get('series'), x: p.has('x') ? Number(p.get('x')) : null };
  }

  // ------------------------------------------------------------------ timeline

  const TL = {
    plot: new Plot($('chart')),
    wrap: $('chart-wrap'),
    series: null, view: [0, 1], full: [0, 1], data: null,
    ctrl: null, timer: 0, hoverX: null, hoverY: 0, momentX: null,
    drag: null, moved: false, clickTimer: 0, hidden: new Set(), drawnOnce: false,

    metricColor(i) { const pal = colors().palette; return pal[i % pal.length]; },
    marks() {
      if (!S.info || !this.series) return [];
      const id = this.series.id;
      return (S.info.marks || []).filter((m) => m.series == null || m.series === id)
        .slice().sort((a, b) => a.x_rel - b.x_rel);
    },
    stepAt(x) {
      let label = null;
      for (const m of this.marks()) {
        if (m.x_rel > x) break;
        if (m.kind === 'step') label = m.label;
      }
      return label;
    },
    select(id, keepView) {
      const s = (S.info.series || []).find((q) => q.id === id) || S.info.series[0];
      if (!s) return;
      const same = this.series && this.series.id === s.id;
      this.series = s;
      $('series').value = s.id;
      let a = Number(s.x_min_rel), b = Number(s.x_max_rel);
      if (!(b > a)) b = a + 1;
      this.full = [a, b + Math.max(1, (b - a) * 0.01)];
      this.minSpan = Math.min(this.full[1] - this.full[0], s.x === 'entry' ? 8 : 1000);
      if (!same) { this.data = null; this.momentX = null; closeMoment(); }
      if (!keepView || !same) this.view = this.full.slice();
      this.legend();
      this.draw();
      this.fetchNow();
    },
    legend() {
      const L = $('legend');
      L.textContent = '';
      (this.series.metrics || []).forEach((m, i) => {
        const key = h('button', { class: 'key ghost', title: 'Show or hide ' + m, 'aria-pressed': String(!this.hidden.has(m)) });
        const sw = h('i');
        sw.style.background = this.metricColor(i);
        key.append(sw, h('b', { text: m }));
        if (this.hidden.has(m)) key.style.opacity = '0.45';
        key.addEventListener('click', () => {
          if (this.hidden.has(m)) this.hidden.delete(m); else this.hidden.add(m);
          this.legend(); this.draw();
        });
        L.append(key);
      });
      const pk = this.series.peak;
      if (pk) L.append(h('span', { class: 'sub', text: `peak ${pk.metric} ${fmtBytes(pk.bytes)} at ${fmtX(this.series, pk.x_rel)}` }));
    },
    setView(x0, x1) {
      const [F0, F1] = this.full;
      let span = clamp(x1 - x0, this.minSpan, F1 - F0);
      if (x1 - x0 !== span) { const c = (x0 + x1) / 2; x0 = c - span / 2; x1 = c + span / 2; }
      if (x0 < F0) { x0 = F0; x1 = F0 + span; }
      if (x1 > F1) { x1 = F1; x0 = F1 - span; }
      this.view = [x0, x1];
      this.draw();
      this.schedule();
    },
    zoom(factor, anchor) {
      const [x0, x1] = this.view;
      if (anchor == null) anchor = (this.momentX != null && this.momentX > x0 && this.momentX < x1) ? this.momentX : (x0 + x1) / 2;
      this.setView(anchor - (anchor - x0) * factor, anchor + (x1 - anchor) * factor);
    },
    pan(fraction) {
      const [x0, x1] = this.view;
      const d = (x1 - x0) * fraction;
      this.setView(x0 + d, x1 + d);
    },
    reset() { this.setView(this.full[0], this.full[1]); },
    schedule() {
      clearTimeout(this.timer);
      this.timer = setTimeout(() => this.fetchNow(), 50);
    },
    fetchNow() {
      clearTimeout(this.timer);
      if (!this.series || !this.plot.visible) return;
      if (this.ctrl) this.ctrl.abort();
      const ctrl = new AbortController();
      this.ctrl = ctrl;
      const s = this.series;
      const [x0, x1] = this.view;
      const q = qs({ series: s.id, x0: String(Math.floor(x0)), x1: String(Math.ceil(x1)), px: String(Math.max(16, Math.round(this.plot.iw))) });
      api('/api/timeline?' + q, { signal: ctrl.signal }).then((j) => {
        if (ctrl.signal.aborted || this.series !== s) return;
        this.ctrl = null;
        this.data = j;
        this.draw();
        bump('timeline');
        if (!this.drawnOnce) { this.drawnOnce = true; body.dataset.ready = '1'; }
      }).catch((e) => { if (!isAbort(e)) showError(e); });
    },
    layout() {
      if (this.plot.resize()) { $('hover').hidden = true; this.hoverX = null; this.draw(); if (this.plot.visible) this.schedule(); }
    },
    draw() {
      const p = this.plot, s = this.series;
      if (!s || !p.visible) return;
      const c = colors();
      const [x0, x1] = this.view;
      p.x0 = x0; p.x1 = x1;
      const metrics = (s.metrics || []).filter((m) => !this.hidden.has(m));
      let ymax = 0;
      for (const m of metrics) ymax = Math.max(ymax, maxIn(this.data, m, x0, x1));
      p.fitY(ymax, 'bytes');
      p.begin();
      p.axes(s.x === 'entry' ? entryTicks : timeTicks, p.byteTicks(), s.x === 'entry' ? 1 : 0);
      p.clip();
      const marks = this.marks().filter((m) => m.x_rel >= x0 && m.x_rel <= x1);
      const steps = marks.filter((m) => m.kind !== 'oom');
      if (steps.length <= 60) for (const m of steps) p.vline(m.x_rel, c.grid, [3, 3]);
      if (this.data) {
        // the first metric (live, active, allocated) last, on top
        const ms = s.metrics || [];
        for (let i = ms.length - 1; i >= 0; i--) {
          if (!this.hidden.has(ms[i])) drawMetric(p, this.data, ms[i], this.metricColor(i), s.x_max_rel);
        }
      }
      for (const m of marks) if (m.kind === 'oom') p.vline(m.x_rel, c.oom, [5, 3], 1.5);
      if (this.momentX != null && this.momentX >= x0 && this.momentX <= x1) p.vline(this.momentX, c.cursor, null, 1.5);
      if (this.hoverX != null && !this.drag) p.vline(this.hoverX, c.muted, [2, 2]);
      p.unclip();
      this.drawMarks(marks);
      // where the plot is, for tests and tools: x of a client pixel without knowing the margins
      Object.assign(p.c.dataset, { series: s.id, x0: String(x0), x1: String(x1), plotLeft: String(p.m.l), plotWidth: String(p.iw) });
      $('range').textContent = (s.x === 'entry'
        ? `entries ${fmtInt(x0)}–${fmtInt(x1)}`
        : `${fmtX(s, x0)} – ${fmtX(s, x1)}` + (fmtWall(s, 0) ? ` · start ${fmtWall(s, 0)}` : ''));
    },
    drawMarks(marks) {
      const p = this.plot, ctx = p.ctx, c = colors();
      const base = p.m.t + p.ih;
      let lastLabel = -Infinity;
      ctx.save();
      ctx.textBaseline = 'top'; ctx.textAlign = 'center';
      for (const m of marks) {
        const X = Math.round(p.px(m.x_rel)) + 0.5;
        const oom = m.kind === 'oom';
        ctx.fillStyle = oom ? c.oom : c.step;
        ctx.beginPath();
        ctx.moveTo(X, base - 1); ctx.lineTo(X - 4, base + 6); ctx.lineTo(X + 4, base + 6); ctx.closePath();
        ctx.fill();
        if (oom) {
          // OOM: labelled at the top of its line, clear of the step numbers
          ctx.save();
          ctx.font = 'bold 11px system-ui, sans-serif';
          const w = ctx.measureText('OOM').width;
          const right = X + 4 + w < p.m.l + p.iw;
          ctx.textAlign = right ? 'left' : 'right';
          ctx.fillText('OOM', right ? X + 4 : X - 4, p.m.t + 3);
          ctx.restore();
          continue;
        }
        const label = String(m.label || '').replace(/^step\s*/i, '');
        ctx.font = '10px system-ui, sans-serif';
        const w = ctx.measureText(label).width;
        if (label && X - w / 2 > lastLabel + 6) {
          ctx.fillText(label, X, base + 25);
          lastLabel = X + w / 2;
        }
      }
      if (marks.some((m) => m.kind !== 'oom')) {
        ctx.textAlign = 'right'; ctx.fillStyle = c.step; ctx.font = '10px system-ui, sans-serif';
        ctx.fillText('step', p.m.l - 6, base + 25);
      }
      ctx.restore();
    },
    hover(X, Y) {
      const p = this.plot, s = this.series, tip = $('hover');
      if (!s || !p.inside(X, Y)) { this.hoverX = null; tip.hidden = true; this.draw(); return; }
      const x = p.xAt(X);
      this.hoverX = x;
      this.draw();
      tip.textContent = '';
      tip.append(h('div', { class: 't', text: fmtX(s, x) }));
      const step = this.stepAt(x);
      const wall = fmtWall(s, x);
      if (step || wall) tip.append(h('div', { class: 'sub', text: [step, wall].filter(Boolean).join(' · ') }));
      (s.metrics || []).forEach((m, i) => {
        if (this.hidden.has(m)) return;
        const v = valueAt(this.data, m, x);
        let text = v ? fmtBytes(v.last) : '–';
        if (v && v.min != null && v.max != null && v.min !== v.max) text += ` (${fmtBytes(v.min)} … ${fmtBytes(v.max)})`;
        tip.append(tipRow(this.metricColor(i), m, text));
      });
      const near = this.marks().find((m) => m.kind === 'oom' && Math.abs(p.px(m.x_rel) - X) < 5);
      if (near) tip.append(h('div', { class: 'sub', text: 'OOM: ' + near.label }));
      placeTip(tip, this.wrap, X, Y - 20);
    },
  };

  (function wireTimeline() {
    const cv = $('chart');
    cv.addEventListener('wheel', (e) => {
      if (!TL.series) return;
      e.preventDefault();
      const r = cv.getBoundingClientRect();
      const X = e.clientX - r.left;
      let dy = e.deltaY;
      if (e.deltaMode === 1) dy *= 33; else if (e.deltaMode === 2) dy *= 400;
      const f = Math.exp(clamp(dy, -600, 600) * 0.0015);
      TL.zoom(f, TL.plot.xAt(clamp(X, TL.plot.m.l, TL.plot.m.l + TL.plot.iw)));
    }, { passive: false });
    cv.addEventListener('pointerdown', (e) => {
      if (e.button !== 0 || !TL.series) return;
      const r = cv.getBoundingClientRect();
      TL.drag = { X: e.clientX - r.left, view: TL.view.slice(), id: e.pointerId };
      TL.moved = false;
    });
    cv.addEventListener('pointermove', (e) => {
      const r = cv.getBoundingClientRect();
      const X = e.clientX - r.left, Y = e.clientY - r.top;
      if (TL.drag && (e.buttons & 1)) {
        const dx = X - TL.drag.X;
        if (!TL.moved && Math.abs(dx) < 4) return;
        if (!TL.moved) { TL.moved = true; cv.setPointerCapture(TL.drag.id); cv.classList.add('dragging'); $('hover').hidden = true; }
        const [a, b] = TL.drag.view;
        const d = -dx / TL.plot.iw * (b - a);
        TL.setView(a + d, b + d);
        return;
      }
      TL.hover(X, Y);
    });
    const endDrag = () => { TL.drag = null; cv.classList.remove('dragging'); };
    cv.addEventListener('pointerup', endDrag);
    cv.addEventListener('pointercancel', endDrag);
    cv.addEventListener('pointerleave', () => { if (!TL.drag) { TL.hoverX = null; $('hover').hidden = true; TL.draw(); } });
    cv.addEventListener('click', (e) => {
      if (TL.moved) { TL.moved = false; return; }
      if (e.detail > 1 || !TL.series) return;
      const r = cv.getBoundingClientRect();
      const X = e.clientX - r.left, Y = e.clientY - r.top;
      if (!TL.plot.inside(X, Y + 0) && !(Y > TL.plot.m.t + TL.plot.ih && Y < TL.plot.h)) return;
      let x = clamp(TL.plot.xAt(X), TL.series.x_min_rel, TL.series.x_max_rel);
      // a click within a few pixels of the peak or an OOM means that instant
      const near = [TL.series.peak && TL.series.peak.x_rel, ...TL.marks().filter((m) => m.kind === 'oom').map((m) => m.x_rel)]
        .filter((c) => c != null && Math.abs(TL.plot.px(c) - X) <= 5)
        .sort((a, b) => Math.abs(TL.plot.px(a) - X) - Math.abs(TL.plot.px(b) - X));
      if (near.length) x = near[0];
      clearTimeout(TL.clickTimer);
      TL.clickTimer = setTimeout(() => openMoment(x), 220);
    });
    cv.addEventListener('dblclick', (e) => { e.preventDefault(); clearTimeout(TL.clickTimer); TL.reset(); });
    $('zoom-in').addEventListener('click', () => TL.zoom(0.5));
    $('zoom-out').addEventListener('click', () => TL.zoom(2));
    $('zoom-reset').addEventListener('click', () => TL.reset());
    $('series').addEventListener('change', (e) => { TL.select(e.target.value); writeHash(); });
    new ResizeObserver(() => { if (S.tab === 'timeline') TL.layout(); }).observe(TL.wrap);
  })();

  // ------------------------------------------------------------------ the moment

  const MO = { ctrl: null, data: null, blockCtrl: null, blocksShown: 0, blocks: [] };

  function closeMoment() {
    $('moment').hidden = true;
    doc.querySelector('.timeline-grid').classList.add('closed');
    if (MO.ctrl) MO.ctrl.abort();
    if (MO.blockCtrl) MO.blockCtrl.abort();
    TL.layout();
  }
  $('moment-close').addEventListener('click', () => { TL.momentX = null; closeMoment(); TL.draw(); writeHash(); });

  async function openMoment(x, seriesId) {
    const s = seriesId ? (S.info.series.find((q) => q.id === seriesId) || TL.series) : TL.series;
    if (!s) return;
    if (s !== TL.series) TL.select(s.id);
    TL.momentX = x;
    if (x < TL.view[0] || x > TL.view[1]) {
      const span = TL.view[1] - TL.view[0];
      TL.setView(x - span / 2, x + span / 2);
    }
    TL.draw();
    writeHash();
    const panel = $('moment');
    const wasHidden = panel.hidden;
    panel.hidden = false;
    doc.querySelector('.timeline-grid').classList.remove('closed');
    if (wasHidden) TL.layout();
    $('moment-label').textContent = fmtX(s, x) + ' · loading…';
    if (MO.ctrl) MO.ctrl.abort();
    const ctrl = new AbortController();
    MO.ctrl = ctrl;
    try {
      const j = await api('/api/moment?' + qs({ series: s.id, x: String(Math.round(x)) }), { signal: ctrl.signal });
      if (ctrl.signal.aborted) return;
      MO.data = j;
      renderMoment(j, s);
      bump('moment');
      const top = MO.blocks[0];
      if (top) openBlock(top.id, 0);
      else $('block').hidden = true;
    } catch (e) {
      if (isAbort(e)) return;
      $('moment-label').textContent = fmtX(s, x);
      showError(e);
    }
  }

  /** A frame or path shortened from the left, where it matters least: "…/pkg/file.py:22:forward". */
  function shortName(name, always) {
    if (!name || (name.length <= 48 && !always)) return name;
    const parts = name.split('/');
    return parts.length > 1 ? '…/' + parts[parts.length - 1] : name;
  }

  function renderBars(box, items, total, limit) {
    box.textContent = '';
    const list = (items || []).slice().sort((a, b) => b.bytes - a.bytes);
    if (!list.length) { box.append(h('div', { class: 'empty', text: 'nothing live' })); return; }
    const max = Math.max(1, list[0].bytes);
    const show = (n) => {
      box.textContent = '';
      for (const it of list.slice(0, n)) {
        const fill = h('div', { class: 'fill' });
        fill.style.width = Math.max(0.5, 100 * it.bytes / max) + '%';
        const title = `${it.name}\n${fmtBytes(it.bytes)} in ${fmtInt(it.blocks)} block${it.blocks === 1 ? '' : 's'}` + (total ? `, ${pct(it.bytes, total)} of live` : '');
        box.append(
          h('div', { class: 'name', title, text: shortName(it.name) || '(none)' }),
          h('div', { class: 'track', title }, fill),
          h('div', { class: 'val', title, text: fmtBytes(it.bytes) }),
        );
      }
      if (list.length > n) {
        box.append(h('button', { class: 'link more', text: `${list.length - n} more…`, onclick: () => show(list.length) }));
      }
    };
    show(limit || 8);
  }

  function renderMoment(j, s) {
    const step = TL.stepAt(j.x_rel);
    $('moment-label').textContent = (j.label || fmtX(s, j.x_rel)) + (step && !/step/i.test(j.label || '') ? ', ' + step : '');
    $('moment-total').textContent = fmtBytes(j.total_bytes);
    renderBars($('by-owner'), j.by_owner, j.total_bytes, 6);
    // no owners (snapshots, traces): the frames take their place at the top
    const noOwners = !(j.by_owner && j.by_owner.length) && (j.by_frame && j.by_frame.length);
    $('owner-section').hidden = !!noOwners;
    const frames = $('frame-section');
    if (noOwners) $('owner-section').after(frames);
    else $('by-category').closest('section').before(frames);
    renderBars($('by-frame'), j.by_frame, j.total_bytes, 8);
    renderBars($('by-category'), j.by_category, j.total_bytes, 8);
    MO.blocks = (j.blocks || []).slice().sort((a, b) => b.size - a.size);
    MO.blocksShown = 0;
    $('blocks').tBodies[0].textContent = '';
    moreBlocks(10);
    renderSegments(j.segments || []);
  }

  function moreBlocks(n) {
    const tb = $('blocks').tBodies[0];
    const s = TL.series;
    if (!MO.blocks.length && !MO.blocksShown) {
      tb.append(h('tr', null, h('td', { colspan: '4', class: 'empty', text: 'no live block' })));
    }
    for (const b of MO.blocks.slice(MO.blocksShown, MO.blocksShown + n)) {
      const tr = h('tr', { tabindex: '0', 'data-id': b.id, title: `${b.ptr} · ${b.owner || ''}` },
        h('td', { class: 'num', text: fmtBytes(b.size) }),
        h('td', { text: b.owner || '–', title: b.owner || '' }),
        h('td', { text: shortName(b.frame, true) || '–', title: b.frame || '' }),
        h('td', { class: 'num', text: b.alloc_x_rel == null ? '–' : s.x === 'entry' ? fmtInt(b.alloc_x_rel) : fmtX(s, b.alloc_x_rel), title: b.alloc_x_rel == null ? 'not recorded' : fmtX(s, b.alloc_x_rel) }));
      tr.addEventListener('click', () => openBlock(b.id, 1));
      tr.addEventListener('keydown', (e) => { if (e.key === 'Enter' || e.key === ' ') { e.preventDefault(); openBlock(b.id, 1); } });
      tb.append(tr);
    }
    MO.blocksShown = Math.min(MO.blocks.length, MO.blocksShown + n);
    const more = $('blocks-more');
    const left = MO.blocks.length - MO.blocksShown;
    more.hidden = left <= 0;
    more.textContent = left <= 20 ? `${left} more…` : `20 more (of ${left})…`;
  }
  $('blocks-more').addEventListener('click', () => moreBlocks(20));

  function renderSegments(segs) {
    const sec = $('segments-section'), box = $('segments');
    sec.hidden = !segs.length;
    box.textContent = '';
    if (!segs.length) return;
    const total = segs.reduce((a, g) => a + g.size, 0);
    const used = segs.reduce((a, g) => a + g.allocated, 0);
    $('segments-summary').textContent = `${segs.length} · ${fmtBytes(used)} allocated of ${fmtBytes(total)} reserved (${pct(used, total)})`;
    for (const g of segs) {
      const fill = h('div', { class: 'fill' });
      fill.style.width = (g.size > 0 ? 100 * g.allocated / g.size : 0) + '%';
      const d = h('div', { class: 'seg', title: `segment ${g.address}\n${fmtBytes(g.size)}: ${fmtBytes(g.allocated)} allocated, ${fmtBytes(g.free)} free` }, fill);
      d.style.width = `calc(${(100 * g.size / Math.max(1, total)).toFixed(3)}% - 2px)`;
      box.append(d);
    }
  }

  async function openBlock(id, user) {
    const row = MO.blocks.find((b) => b.id === id) || {};
    const s = TL.series;
    for (const tr of $('blocks').tBodies[0].rows) tr.classList.toggle('selected', tr.dataset.id === id);
    if (MO.blockCtrl) MO.blockCtrl.abort();
    const ctrl = new AbortController();
    MO.blockCtrl = ctrl;
    try {
      const b = await api('/api/block?' + qs({ series: s.id, id }), { signal: ctrl.signal });
      if (ctrl.signal.aborted) return;
      // what the block answer lacks, the moment's row may know
      for (const k of ['ptr', 'size', 'owner', 'frame', 'alloc_x_rel', 'free_x_rel']) if (b[k] == null && row[k] != null) b[k] = row[k];
      renderBlock(b, s);
      bump('block');
      if (user) $('block').scrollIntoView({ block: 'nearest', behavior: 'smooth' });
    } catch (e) { showError(e); }
  }

  function renderBlock(b, s) {
    $('block').hidden = false;
    $('block-id').textContent = b.ptr || b.id;
    const dl = $('block-facts');
    dl.textContent = '';
    const fact = (k, v) => dl.append(h('dt', { text: k }), h('dd', { text: v }));
    fact('size', b.size == null ? '–' : `${fmtBytes(b.size)} (${fmtInt(b.size)} B)`);
    fact('owner', b.owner || '–');
    if (b.frame) fact('frame', b.frame);
    fact('allocated', b.alloc_x_rel == null ? 'not recorded (before the trace starts)' : fmtX(s, b.alloc_x_rel));
    fact('freed', b.free_x_rel == null ? 'not freed (live at the end)' : fmtX(s, b.free_x_rel));
    if (b.lifetime) fact('lifetime', b.lifetime);
    fact('id', b.id);
    const stack = (ol, frames, none) => {
      ol.textContent = '';
      ol.classList.toggle('none', !(frames && frames.length));
      if (!(frames && frames.length)) { ol.append(h('li', { text: none })); return; }
      for (const f of frames) ol.append(h('li', { text: f }));
    };
    stack($('block-alloc-stack'), b.alloc_stack, 'no stack recorded');
    stack($('block-free-stack'), b.free_stack, b.free_x_rel == null ? 'not freed' : 'no stack recorded');
  }

  // ------------------------------------------------------------------ findings

  const SEV_ORDER = { error: 0, warning: 1, info: 2, ok: 3 };
  async function loadFindings() {
    const list = $('finding-list');
    list.textContent = '';
    list.append(h('p', { class: 'sub', text: 'loading…' }));
    try {
      const j = await api('/api/findings');
      renderFindings(j);
    } catch (e) { list.textContent = ''; showError(e); }
  }
  function renderFindings(j) {
    const v = j.verdict || {};
    const vd = $('verdict');
    vd.className = 'verdict ' + (v.severity || 'ok');
    vd.textContent = '';
    vd.append(h('span', { class: 'badge ' + (v.severity || 'ok'), text: v.severity || 'ok' }), ' ',
      h('strong', { text: v.summary || '' }));
    if (v.actions && v.actions.length) vd.append(h('ul', null, v.actions.map((a) => h('li', { text: a }))));
    const list = $('finding-list');
    list.textContent = '';
    const fs = (j.findings || []).slice().sort((a, b) => (SEV_ORDER[a.severity] ?? 9) - (SEV_ORDER[b.severity] ?? 9));
    if (!fs.length) list.append(h('p', { class: 'sub', text: 'No findings.' }));
    for (const f of fs) {
      const card = h('article', { class: 'card ' + f.severity },
        h('div', null, h('span', { class: 'badge ' + f.severity, text: f.severity }), h('span', { class: 'kind', text: f.kind })),
        h('h3', { text: f.title }),
        f.problem ? h('p', { text: f.problem }) : null,
        (f.evidence && f.evidence.length) ? h('ul', { class: 'evidence' }, f.evidence.map((e) => h('li', { text: e }))) : null,
        (f.advice && f.advice.length) ? h('div', null, h('h4', { text: 'What to do' }), h('ul', null, f.advice.map((a) => h('li', { text: a })))) : null);
      if (f.moment) {
        const s = (S.info.series || []).find((q) => q.id === f.moment.series);
        const a = h('a', { href: '#timeline?' + qs({ series: f.moment.series, x: String(Math.round(f.moment.x_rel)) }), class: 'show', text: 'show' });
        a.addEventListener('click', (e) => { e.preventDefault(); showMoment(f.moment.series, f.moment.x_rel); });
        card.append(h('div', { class: 'foot' }, h('span', { class: 'sub', text: (s ? s.label + ' ' : '') + fmtX(s, f.moment.x_rel) }), a));
      }
      list.append(card);
    }
  }
  function showMoment(seriesId, x) {
    setTab('timeline');
    if (!TL.series || TL.series.id !== seriesId) TL.select(seriesId);
    openMoment(x, seriesId);
  }

  // ------------------------------------------------------------------ compare

  const CMP = {
    plot: new Plot($('cmp-chart')), wrap: $('cmp-wrap'), data: null, ctrl: null, hoverX: null,
    init() {
      const ss = S.info.series || [];
      for (const sel of [$('cmp-a'), $('cmp-b')]) {
        sel.textContent = '';
        for (const s of ss) sel.append(h('option', { value: s.id, text: s.label || s.id }));
      }
      // B: the same curve of another device or run if there is one (labels equal but for numbers)
      if (ss.length > 1) {
        const shape = (x) => `${x.kind} ${String(x.label).replace(/\d+/g, '#')}`;
        const twin = ss.find((x) => x !== ss[0] && shape(x) === shape(ss[0]));
        $('cmp-b').value = (twin || ss[1]).id;
      }
      this.metrics('a'); this.metrics('b');
      this.layout();
      if (ss.length) this.run();
      if (ss.length < 2) $('cmp-note').textContent = 'one series only: give memq serve two inputs to compare runs';
    },
    series(which) { return (S.info.series || []).find((s) => s.id === $('cmp-' + which).value); },
    metrics(which) {
      const s = this.series(which), sel = $('cmp-metric-' + which);
      sel.textContent = '';
      if (!s) return;
      for (const m of s.metrics || []) sel.append(h('option', { value: m, text: m }));
      if (s.peak && (s.metrics || []).includes(s.peak.metric)) sel.value = s.peak.metric;
    },
    layout() { if (this.plot.resize()) this.draw(); },
    async run() {
      const a = this.series('a'), b = this.series('b');
      if (!a || !b) return;
      this.layout();
      if (this.ctrl) this.ctrl.abort();
      const ctrl = new AbortController();
      this.ctrl = ctrl;
      try {
        const j = await api('/api/compare?' + qs({ a: a.id, b: b.id, px: String(Math.max(16, Math.round(this.plot.iw || 800))) }), { signal: ctrl.signal });
        if (ctrl.signal.aborted) return;
        this.data = { j, a, b };
        this.draw();
      } catch (e) { showError(e); }
    },
    /** x of the plot for an answer's x: shared relative axis, or share of each run when the kinds differ. */
    mapping() {
      const { j, a, b } = this.data;
      const sameKind = a.x === b.x;
      const ra = j.a, rb = j.b;
      if (sameKind) return { sameKind, fa: (x) => x, fb: (x) => x, x1: Math.max(ra.x1, rb.x1), kind: a.x };
      const f = (r) => (x) => (x - r.x0) / Math.max(1e-9, r.x1 - r.x0);
      return { sameKind, fa: f(ra), fb: f(rb), x1: 1, kind: 'share' };
    },
    draw() {
      const p = this.plot;
      if (!p.visible || !this.data) return;
      const c = colors();
      const { j, a, b } = this.data;
      const ma = $('cmp-metric-a').value, mb = $('cmp-metric-b').value;
      const map = this.mapping();
      p.x0 = Math.min(j.a.x0, j.b.x0, 0); p.x1 = map.x1;
      if (!map.sameKind) p.x0 = 0;
      p.fitY(Math.max(maxIn(j.a, ma, -Infinity, Infinity), maxIn(j.b, mb, -Infinity, Infinity)), 'bytes');
      p.begin();
      const xf = map.kind === 'time' ? timeTicks : map.kind === 'entry' ? entryTicks : () => (x) => Math.round(x * 100) + ' %';
      p.axes(xf, p.byteTicks(), map.kind === 'entry' ? 1 : 0);
      p.clip();
      const ca = c.palette[0], cb = c.palette[3];
      drawMetric(p, j.a, ma, ca, a.x_max_rel, map.fa);
      drawMetric(p, j.b, mb, cb, b.x_max_rel, map.fb);
      if (this.hoverX != null) p.vline(this.hoverX, c.muted, [2, 2]);
      p.unclip();
      $('cmp-note').textContent = map.sameKind ? 'both from their own start' : 'x: share of each run (their x differ: time and entries)';
      const L = $('cmp-legend');
      L.textContent = '';
      const key = (color, s, m, tl) => {
        const i = h('i'); i.style.background = color;
        const pk = maxIn(tl, m, -Infinity, Infinity);
        return h('span', { class: 'key' }, i, h('b', { text: `${s.label || s.id}` }), ` ${m}, peak ${fmtBytes(pk)}`);
      };
      L.append(key(ca, a, ma, j.a), key(cb, b, mb, j.b));
    },
    hover(X, Y) {
      const p = this.plot, tip = $('cmp-hover');
      if (!this.data || !p.inside(X, Y)) { this.hoverX = null; tip.hidden = true; this.draw(); return; }
      const x = p.xAt(X);
      this.hoverX = x;
      this.draw();
      const { j, a, b } = this.data;
      const map = this.mapping();
      const back = (r) => map.sameKind ? x : r.x0 + x * (r.x1 - r.x0);
      const ma = $('cmp-metric-a').value, mb = $('cmp-metric-b').value;
      const c = colors();
      tip.textContent = '';
      tip.append(h('div', { class: 't', text: map.sameKind ? fmtX(a, x) : Math.round(x * 100) + ' % of each run' }));
      const va = valueAt(j.a, ma, back(j.a)), vb = valueAt(j.b, mb, back(j.b));
      tip.append(tipRow(c.palette[0], `${a.label || a.id} ${ma}`, va ? fmtBytes(va.last) : '–'));
      tip.append(tipRow(c.palette[3], `${b.label || b.id} ${mb}`, vb ? fmtBytes(vb.last) : '–'));
      if (va && vb) tip.append(tipRow(null, 'B − A', fmtBytes(vb.last - va.last)));
      placeTip(tip, this.wrap, X, Y - 20);
    },
  };
  (function wireCompare() {
    $('cmp-a').addEventListener('change', () => { CMP.metrics('a'); CMP.run(); });
    $('cmp-b').addEventListener('change', () => { CMP.metrics('b'); CMP.run(); });
    $('cmp-metric-a').addEventListener('change', () => CMP.draw());
    $('cmp-metric-b').addEventListener('change', () => CMP.draw());
    $('cmp-go').addEventListener('click', () => CMP.run());
    const cv = $('cmp-chart');
    cv.addEventListener('pointermove', (e) => { const r = cv.getBoundingClientRect(); CMP.hover(e.clientX - r.left, e.clientY - r.top); });
    cv.addEventListener('pointerleave', () => { CMP.hoverX = null; $('cmp-hover').hidden = true; CMP.draw(); });
    new ResizeObserver(() => { if (S.tab === 'compare') CMP.layout(); }).observe(CMP.wrap);
  })();

  // ------------------------------------------------------------------ SQL console

  const SQL = {
    ta: $('sql'), ctrl: null, result: null, catalog: null, catalogP: null, names: [],
    complete: { open: false, items: [], active: 0, start: 0, end: 0 },
    plot: new Plot($('sql-canvas')), chartSpec: null,

    open() {
      this.loadCatalog();
      if (doc.activeElement !== this.ta) setTimeout(() => this.ta.focus(), 0);
      if (this.chartSpec) { this.plot.resize(); this.drawChart(); }
    },
    loadCatalog() {
      if (!this.catalogP) {
        this.catalogP = api('/api/catalog').then((c) => {
          this.catalog = c;
          this.buildNames();
          this.renderCatalog();
          return c;
        }).catch((e) => { this.catalogP = null; showError(e); });
      }
      return this.catalogP;
    },
    buildNames() {
      const c = this.catalog, names = new Map();
      const add = (name, what, rank, table) => {
        if (!name) return;
        const k = name;
        const cur = names.get(k);
        if (cur) { if (table) cur.tables.add(table); return; }
        names.set(k, { name, what, rank, tables: new Set(table ? [table] : []) });
      };
      for (const t of c.tables || []) add(t.name, 'table', 1);
      for (const a of c.analyses || []) add(a.name, a.kind || 'analysis', 1);
      for (const f of c.functions || []) add(f.name, 'function', 2);
      for (const t of c.tables || []) for (const col of t.columns || []) add(col.name, 'column', 3, t.name);
      for (const a of c.analyses || []) for (const col of a.columns || []) add(col.name, 'column', 3, a.name);
      this.names = [...names.values()];
    },
    renderCatalog() {
      const box = $('catalog-list'), c = this.catalog;
      box.textContent = '';
      const insertBtn = (text, what) => h('button', { class: 'link', text: 'insert', title: 'Insert ' + what, onclick: () => this.insert(text) });
      const cols = (list) => h('ul', { class: 'cols' }, (list || []).map((col) => {
        const li = h('li', { title: col.doc || '' }, col.name, ' ', h('span', { class: 't', text: [col.type, col.unit].filter(Boolean).join(' · ') }));
        li.addEventListener('click', () => this.insert(col.name));
        return li;
      }));
      const section = (title, items, make) => {
        if (!items || !items.length) return;
        box.append(h('h3', { text: title }));
        for (const it of items) box.append(make(it));
      };
      section('Tables', c.tables, (t) => h('details', { 'data-name': t.name },
        h('summary', null, t.name, h('span', { class: 'what', text: `${(t.columns || []).length} columns` })),
        t.doc ? h('div', { class: 'doc', text: t.doc }) : null,
        h('div', { class: 'doc' }, insertBtn(t.name, t.name)),
        cols(t.columns)));
      section('Analyses', c.analyses, (a) => h('details', { 'data-name': a.name },
        h('summary', null, a.name, h('span', { class: 'what', text: a.kind || '' })),
        h('div', { class: 'doc' }, h('code', { text: a.call || a.name }), ' ', insertBtn(a.call || a.name, a.name)),
        (a.summary || a.doc) ? h('div', { class: 'doc', text: a.summary || a.doc }) : null,
        cols(a.columns)));
      section('Functions', c.functions, (f) => h('details', { 'data-name': f.name },
        h('summary', null, f.name, h('span', { class: 'what', text: 'function' })),
        h('div', { class: 'doc' }, h('code', { text: f.usage || f.name }), ' ', insertBtn(f.name + '(', f.name)),
        f.doc ? h('div', { class: 'doc', text: f.doc }) : null));
    },
    insert(text) {
      const ta = this.ta;
      const s = ta.selectionStart, e = ta.selectionEnd;
      ta.setRangeText(text, s, e, 'end');
      ta.focus();
      this.updateLinks();
    },
    updateLinks() {
      const sql = this.ta.value.trim();
      for (const [id, path] of [['sql-csv', '/api/sql.csv'], ['sql-parquet', '/api/sql.parquet']]) {
        const a = $(id);
        if (sql) { a.href = path + '?' + qs({ sql }); a.classList.remove('disabled'); a.removeAttribute('aria-disabled'); }
        else { a.removeAttribute('href'); a.classList.add('disabled'); a.setAttribute('aria-disabled', 'true'); }
      }
    },

    // completion
    wordAt() {
      const ta = this.ta, pos = ta.selectionStart;
      const before = ta.value.slice(0, pos);
      const m = /[A-Za-z_][A-Za-z0-9_]*$/.exec(before);
      const start = m ? pos - m[0].length : pos;
      const after = /^[A-Za-z0-9_]*/.exec(ta.value.slice(pos))[0];
      return { prefix: m ? m[0] : '', start, end: pos + after.length, before };
    },
    candidates(prefix, before) {
      const p = prefix.toLowerCase();
      const prev = (/([A-Za-z_]+)\s+(?:[A-Za-z_][A-Za-z0-9_]*)?$/.exec(before) || [])[1];
      const wantTable = prev && /^(from|join|table|into|describe)$/i.test(prev);
      const sql = this.ta.value.toLowerCase();
      const mentioned = new Set(this.names.filter((n) => n.what !== 'column' && n.what !== 'function' && new RegExp('\\b' + n.name.toLowerCase() + '\\b').test(sql)).map((n) => n.name));
      const score = (n) => {
        if (wantTable) return n.what === 'column' || n.what === 'function' ? 5 : 0;
        if (n.what === 'column') return [...n.tables].some((t) => mentioned.has(t)) ? 0 : 4;
        if (n.what === 'function') return 1;
        return 2;
      };
      let hits = this.names.filter((n) => n.name.toLowerCase().startsWith(p));
      // after FROM or JOIN only relations, when some match
      if (wantTable && hits.some((n) => n.what !== 'column' && n.what !== 'function')) {
        hits = hits.filter((n) => n.what !== 'column' && n.what !== 'function');
      }
      return hits
        .map((n) => ({ n, s: score(n) }))
        .sort((a, b) => a.s - b.s || a.n.name.localeCompare(b.n.name))
        .map((x) => x.n)
        .slice(0, 200);
    },
    async triggerComplete(explicit) {
      if (!this.catalog) await this.loadCatalog();
      if (!this.catalog) return false;
      const w = this.wordAt();
      if (!w.prefix && !explicit) return false;
      const items = this.candidates(w.prefix, w.before.slice(0, w.start));
      if (!items.length) { this.closeComplete(); return !!w.prefix; }
      if (items.length === 1) { this.accept(items[0], w); return true; }
      // extend to the longest common prefix, then list
      let lcp = items[0].name;
      for (const it of items) { let i = 0; while (i < lcp.length && i < it.name.length && lcp[i].toLowerCase() === it.name[i].toLowerCase()) i++; lcp = lcp.slice(0, i); }
      if (lcp.length > w.prefix.length) {
        this.ta.setRangeText(lcp, w.start, this.ta.selectionStart, 'end');
      }
      this.showComplete(items, this.wordAt());
      return true;
    },
    showComplete(items, w) {
      const C = this.complete, ul = $('sql-complete');
      C.open = true; C.items = items; C.active = 0; C.start = w.start; C.end = w.end;
      ul.textContent = '';
      items.forEach((it, i) => {
        const li = h('li', { role: 'option', 'aria-selected': String(i === 0), class: i === 0 ? 'active' : '' },
          h('span', { text: it.name }),
          h('span', { class: 'what', text: it.what === 'column' && it.tables.size ? 'column · ' + [...it.tables].slice(0, 2).join(', ') + (it.tables.size > 2 ? ', …' : '') : it.what }));
        li.addEventListener('mousedown', (e) => { e.preventDefault(); this.accept(it, this.wordAt()); });
        ul.append(li);
      });
      const xy = caretXY(this.ta, w.start);
      ul.style.left = Math.min(xy.x, Math.max(0, this.ta.clientWidth - 240)) + 'px';
      ul.style.top = xy.y + 'px';
      ul.hidden = false;
    },
    moveActive(d) {
      const C = this.complete, ul = $('sql-complete');
      C.active = (C.active + d + C.items.length) % C.items.length;
      [...ul.children].forEach((li, i) => { li.classList.toggle('active', i === C.active); li.setAttribute('aria-selected', String(i === C.active)); });
      ul.children[C.active].scrollIntoView({ block: 'nearest' });
    },
    accept(item, w) {
      const ta = this.ta;
      let text = item.name;
      if (item.what === 'function' && ta.value[w.end] !== '(') text += '(';
      ta.setRangeText(text, w.start, w.end, 'end');
      this.closeComplete();
      this.updateLinks();
    },
    closeComplete() { this.complete.open = false; $('sql-complete').hidden = true; },

    // running
    async run() {
      const sql = this.ta.value.trim();
      if (!sql) return;
      this.closeComplete();
      if (this.ctrl) this.ctrl.abort();
      const ctrl = new AbortController();
      this.ctrl = ctrl;
      $('sql-status').textContent = 'running…';
      $('sql-run').disabled = true;
      try {
        const j = await api('/api/sql', { body: { sql, max_rows: Number($('sql-max').value) }, signal: ctrl.signal });
        if (ctrl.signal.aborted) return;
        $('sql-error').hidden = true;
        this.renderResult(j);
      } catch (e) {
        if (isAbort(e)) return;
        this.result = null;
        this.chartSpec = null;
        $('sql-chart-wrap').hidden = true;
        $('sql-chart').disabled = true;
        $('sql-result').textContent = '';
        const pre = $('sql-error');
        pre.textContent = e.message;
        pre.hidden = false;
        $('sql-status').textContent = e.status ? `failed (HTTP ${e.status})` : 'failed';
      } finally {
        if (this.ctrl === ctrl) { this.ctrl = null; $('sql-run').disabled = false; }
        if (!ctrl.signal.aborted) bump('sql');
      }
    },
    renderResult(j) {
      this.result = j;
      this.chartSpec = null;
      $('sql-chart-wrap').hidden = true;
      const cols = j.columns || [], rows = j.rows || [], vals = j.values || [];
      const numeric = cols.map((c, k) => /^(u?int|float|double|decimal|int\d|uint\d|float\d)/i.test(c.type || '') || (vals.length > 0 && vals.some((r) => typeof r[k] === 'number')));
      const table = h('table', { class: 'grid' });
      table.append(h('thead', null, h('tr', null, cols.map((c, k) => h('th', { class: numeric[k] ? 'num' : null, title: c.type || '' },
        c.name, c.unit ? h('span', { class: 'unit', text: ` (${c.unit})` }) : null)))));
      const tb = h('tbody');
      const frag = doc.createDocumentFragment();
      for (const r of rows) {
        const tr = doc.createElement('tr');
        for (let k = 0; k < cols.length; k++) {
          const td = doc.createElement('td');
          const v = r[k];
          td.textContent = v == null ? '' : String(v);
          if (numeric[k]) td.className = 'num';
          if (v != null && String(v).length > 40) td.title = String(v);
          tr.append(td);
        }
        frag.append(tr);
      }
      tb.append(frag);
      table.append(tb);
      const box = $('sql-result');
      box.textContent = '';
      box.append(table);
      const shown = rows.length, total = j.total_rows ?? shown;
      $('sql-status').textContent = `${fmtInt(shown)} row${shown === 1 ? '' : 's'}` +
        (j.truncated || total > shown ? ` of ${fmtInt(total)} (first ${fmtInt(shown)} shown; the downloads have all)` : '') +
        (j.elapsed_ms != null ? ` · ${fmtNum(j.elapsed_ms)} ms` : '');
      $('sql-chart').disabled = !this.chartable(j);
    },
    /** Which columns the chart uses: the first numeric column over the first column. */
    chartable(j) {
      const cols = j.columns || [], vals = j.values || [];
      if (!vals.length || !cols.length) return null;
      const isNum = (k) => vals.every((r) => r[k] == null || typeof r[k] === 'number') && vals.some((r) => typeof r[k] === 'number');
      let y = -1;
      for (let k = 1; k < cols.length; k++) if (isNum(k)) { y = k; break; }
      if (y < 0 && isNum(0)) return { x: -1, y: 0, xNum: true };
      if (y < 0) return null;
      // a line over x when x is numeric and increasing, else one bar per row
      const xs = vals.map((r) => r[0]);
      const increasing = isNum(0) && xs.every((v, i) => typeof v === 'number' && (i === 0 || v > xs[i - 1]));
      return { x: 0, y, xNum: increasing };
    },
    chart() {
      const j = this.result;
      const spec = j && this.chartable(j);
      if (!spec) return;
      this.chartSpec = spec;
      $('sql-chart-wrap').hidden = false;
      this.plot.resize();
      this.drawChart();
    },
    drawChart() {
      const j = this.result, spec = this.chartSpec, p = this.plot;
      if (!j || !spec || !p.visible) return;
      const c = colors();
      const cols = j.columns, vals = j.values, rows = j.rows;
      const yUnit = cols[spec.y].unit, xUnit = spec.x >= 0 ? cols[spec.x].unit : null;
      const yFmt = yUnit === 'bytes' ? fmtBytes : yUnit === 'ns' ? fmtDur : fmtNum;
      const pts = [];
      vals.forEach((r, i) => {
        const y = r[spec.y];
        if (typeof y !== 'number') return;
        const x = spec.x < 0 ? i : spec.xNum ? r[spec.x] : i;
        if (typeof x !== 'number') return;
        pts.push({ x, y, i });
      });
      if (!pts.length) return;
      let x0 = Math.min(...pts.map((q) => q.x)), x1 = Math.max(...pts.map((q) => q.x));
      const bars = !spec.xNum || spec.x < 0;
      if (bars) { x0 -= 0.5; x1 += 0.5; }
      if (!(x1 > x0)) { x0 -= 1; x1 += 1; }
      const ints = pts.every((q) => Number.isInteger(q.x));
      if (!bars) { const pad = (x1 - x0) * 0.02; x0 -= pad; x1 += pad; }
      // time columns in ns since the epoch are shown relative to the first row
      const rel = xUnit === 'ns' && Math.abs(x0) > 1e15 ? x0 : 0;
      p.x0 = x0 - rel; p.x1 = x1 - rel;
      const ymin = Math.min(0, ...pts.map((q) => q.y));
      p.fitY(Math.max(...pts.map((q) => q.y)) - ymin, yUnit === 'bytes' ? 'bytes' : null);
      p.y0 += ymin; p.y1 += ymin;
      p.begin();
      let xf;
      if (bars) {
        xf = () => (x) => { const r = rows[Math.round(x)]; const s = r ? String(spec.x < 0 ? Math.round(x) : r[spec.x]) : ''; return s.length > 14 ? s.slice(0, 13) + '…' : s; };
      } else if (xUnit === 'ns') xf = timeTicks;
      else if (xUnit === 'bytes') xf = () => fmtBytes;
      else xf = () => fmtNum;
      p.axes(xf, yUnit === 'bytes' && p.y0 >= 0 ? p.byteTicks() : yFmt, bars || (ints && !rel) ? 1 : 0);
      p.clip();
      const ctx = p.ctx;
      ctx.fillStyle = c.palette[0]; ctx.strokeStyle = c.palette[0]; ctx.lineWidth = 1.6;
      if (bars) {
        const bw = Math.max(1, p.iw / (p.x1 - p.x0) * 0.7);
        for (const q of pts) {
          const X = p.px(q.x - rel), Y = p.py(q.y), Z = p.py(Math.max(0, p.y0));
          ctx.fillRect(X - bw / 2, Math.min(Y, Z), bw, Math.max(1, Math.abs(Z - Y)));
        }
      } else {
        ctx.beginPath();
        pts.forEach((q, k) => { const X = p.px(q.x - rel), Y = p.py(q.y); if (k) ctx.lineTo(X, Y); else ctx.moveTo(X, Y); });
        ctx.stroke();
        if (pts.length <= 200) for (const q of pts) { ctx.beginPath(); ctx.arc(p.px(q.x - rel), p.py(q.y), 2.5, 0, 2 * Math.PI); ctx.fill(); }
      }
      p.unclip();
      ctx.fillStyle = c.muted; ctx.textAlign = 'left'; ctx.textBaseline = 'top';
      ctx.fillText(`${cols[spec.y].name} over ${spec.x < 0 ? 'row' : cols[spec.x].name}` + (rel ? ' (from the first row)' : ''), p.m.l + 6, 2);
      this.chartPts = { pts, rel, bars };
    },
    chartHover(X, Y) {
      const tip = $('sql-hover'), p = this.plot, cp = this.chartPts;
      if (!cp || !p.inside(X, Y)) { tip.hidden = true; return; }
      let best = null, bd = Infinity;
      for (const q of cp.pts) { const d = Math.abs(p.px(q.x - cp.rel) - X); if (d < bd) { bd = d; best = q; } }
      if (!best || bd > 30) { tip.hidden = true; return; }
      const j = this.result, spec = this.chartSpec, r = j.rows[best.i];
      tip.textContent = '';
      tip.append(h('div', { class: 't', text: spec.x < 0 ? 'row ' + (best.i + 1) : String(r[spec.x]) }));
      tip.append(tipRow(colors().palette[0], j.columns[spec.y].name, String(r[spec.y])));
      placeTip(tip, $('sql-chart-wrap'), X, Y - 20);
    },
  };

  /** Pixel position of a character of a textarea (for the completion list), via a mirror. */
  function caretXY(ta, pos) {
    const cs = getComputedStyle(ta);
    const m = doc.createElement('div');
    for (const k of ['fontFamily', 'fontSize', 'fontWeight', 'lineHeight', 'letterSpacing', 'paddingTop', 'paddingLeft',
      'paddingRight', 'paddingBottom', 'borderTopWidth', 'borderLeftWidth', 'borderRightWidth', 'borderBottomWidth', 'boxSizing', 'tabSize']) {
      m.style[k] = cs[k];
    }
    m.style.position = 'absolute'; m.style.visibility = 'hidden'; m.style.top = '0'; m.style.left = '-9999px';
    m.style.whiteSpace = 'pre-wrap'; m.style.overflowWrap = 'break-word'; m.style.borderStyle = 'solid';
    m.style.width = ta.offsetWidth + 'px';
    m.textContent = ta.value.slice(0, pos);
    const mark = doc.createElement('span');
    mark.textContent = '\u200b';
    m.append(mark);
    body.append(m);
    const lh = parseFloat(cs.lineHeight) || 18;
    const r = { x: mark.offsetLeft - ta.scrollLeft, y: mark.offsetTop - ta.scrollTop + lh + 2 };
    m.remove();
    return r;
  }

  (function wireSql() {
    const ta = SQL.ta;
    ta.addEventListener('keydown', (e) => {
      const C = SQL.complete;
      if ((e.ctrlKey || e.metaKey) && e.key === 'Enter') { e.preventDefault(); SQL.run(); return; }
      if (C.open) {
        if (e.key === 'ArrowDown') { e.preventDefault(); SQL.moveActive(1); return; }
        if (e.key === 'ArrowUp') { e.preventDefault(); SQL.moveActive(-1); return; }
        if (e.key === 'Enter' || e.key === 'Tab') { e.preventDefault(); SQL.accept(C.items[C.active], SQL.wordAt()); return; }
        if (e.key === 'Escape') { e.preventDefault(); e.stopPropagation(); SQL.closeComplete(); return; }
      }
      if (e.ctrlKey && (e.key === ' ' || e.code === 'Space')) { e.preventDefault(); SQL.triggerComplete(true); return; }
      if (e.key === 'Tab' && !e.shiftKey && !e.altKey && !e.ctrlKey && !e.metaKey) {
        const w = SQL.wordAt();
        if (w.prefix) { e.preventDefault(); SQL.triggerComplete(false); }
      }
    });
    ta.addEventListener('input', () => {
      SQL.updateLinks();
      if (SQL.complete.open) {
        const w = SQL.wordAt();
        const items = w.prefix ? SQL.candidates(w.prefix, w.before.slice(0, w.start)) : [];
        if (items.length) SQL.showComplete(items, w); else SQL.closeComplete();
      }
    });
    ta.addEventListener('blur', () => setTimeout(() => SQL.closeComplete(), 100));
    $('sql-run').addEventListener('click', () => SQL.run());
    $('sql-chart').addEventListener('click', () => SQL.chart());
    $('catalog-filter').addEventListener('input', (e) => {
      const q = e.target.value.trim().toLowerCase();
      for (const d of $('catalog-list').querySelectorAll('details')) {
        const hit = !q || d.dataset.name.toLowerCase().includes(q) || [...d.querySelectorAll('.cols li')].some((li) => li.firstChild.textContent.toLowerCase().includes(q));
        d.hidden = !hit;
        if (q && hit && !d.dataset.name.toLowerCase().includes(q)) d.open = true;
      }
    });
    const cv = $('sql-canvas');
    cv.addEventListener('pointermove', (e) => { const r = cv.getBoundingClientRect(); SQL.chartHover(e.clientX - r.left, e.clientY - r.top); });
    cv.addEventListener('pointerleave', () => { $('sql-hover').hidden = true; });
    new ResizeObserver(() => { if (S.tab === 'sql' && SQL.chartSpec && SQL.plot.resize()) SQL.drawChart(); }).observe($('sql-chart-wrap'));
    SQL.updateLinks();
  })();

  // ------------------------------------------------------------------ keyboard

  doc.addEventListener('keydown', (e) => {
    const help = $('help');
    if (e.key === 'Escape') {
      if (help.open) return;
      if (S.tab === 'timeline' && !$('moment').hidden && !isTyping(e.target)) { TL.momentX = null; closeMoment(); TL.draw(); writeHash(); }
      return;
    }
    if (e.ctrlKey || e.metaKey || e.altKey || isTyping(e.target) || help.open) return;
    const tabKeys = { t: 'timeline', f: 'findings', c: 'compare', s: 'sql' };
    if (tabKeys[e.key]) { e.preventDefault(); setTab(tabKeys[e.key]); return; }
    if (e.key === '?') { e.preventDefault(); help.showModal(); return; }
    if (S.tab !== 'timeline' || !TL.series) return;
    let done = true;
    switch (e.key) {
      case '0': TL.reset(); break;
      case '+': case '=': TL.zoom(0.5); break;
      case '-': case '_': TL.zoom(2); break;
      case 'ArrowLeft': TL.pan(e.shiftKey ? -0.9 : -0.15); break;
      case 'ArrowRight': TL.pan(e.shiftKey ? 0.9 : 0.15); break;
      default: done = false;
    }
    if (done) e.preventDefault();
  });
  function isTyping(t) {
    return !!(t && t.closest && t.closest('input, textarea, select, [contenteditable=""], [contenteditable="true"]'));
  }
  $('help-button').addEventListener('click', () => $('help').showModal());

  if (window.matchMedia) {
    const mq = window.matchMedia('(prefers-color-scheme: dark)');
    const again = () => { COLORS = null; TL.legend && TL.series && TL.legend(); TL.draw(); CMP.draw(); SQL.drawChart(); };
    if (mq.addEventListener) mq.addEventListener('change', again);
  }

  // ------------------------------------------------------------------ start

  /** The input paths of /api/info (joined by spaces; each absolute path starts a new one). */
  function splitInput(input) { return input.split(/ (?=\/)/).filter(Boolean); }
  /** One path as is; several as their common folder and a count. */
  function shortInput(input) {
    const paths = splitInput(input);
    if (paths.length < 2) return input;
    let prefix = paths[0];
    for (const p of paths) while (!p.startsWith(prefix)) prefix = prefix.slice(0, -1);
    prefix = prefix.slice(0, prefix.lastIndexOf('/') + 1);
    return `${prefix || ''}… (${paths.length} files)`;
  }

  async function start() {
    const want = readHash();
    let info;
    try {
      info = await api('/api/info');
    } catch (e) {
      showError(e);
      return;
    }
    S.info = info;
    doc.title = `memq · ${info.dataset || info.input || ''}`;
    $('dataset').textContent = [shortInput(info.input || ''), info.version ? 'memq ' + info.version : null].filter(Boolean).join(' · ');
    $('dataset').title = [...splitInput(info.input || ''), 'dataset: ' + info.dataset].join('\n');
    const fc = $('findings-count');
    fc.textContent = info.findings ? String(info.findings) : '';
    const sel = $('series');
    sel.textContent = '';
    for (const s of info.series || []) sel.append(h('option', { value: s.id, text: `${s.label || s.id} (${s.kind})` }));
    // the page keeps working from the session cookie: drop the token from the address bar
    writeHash();
    if (!(info.series || []).length) {
      TL.wrap.append(h('p', { class: 'empty', text: 'This input has no memory series to draw.' }));
      body.dataset.ready = '1';
      setTab(want.tab === 'timeline' ? 'findings' : want.tab, { keepHash: false });
      return;
    }
    closeMoment();
    TL.plot.resize();
    TL.select(want.series && info.series.some((s) => s.id === want.series) ? want.series : info.series[0].id);
    setTab(want.tab, { keepHash: true });
    if (want.tab === 'timeline' && want.x != null && Number.isFinite(want.x)) openMoment(want.x);
    writeHash();
  }
  window.addEventListener('unhandledrejection', (e) => { e.preventDefault(); showError(e.reason); });
  start();
})();
