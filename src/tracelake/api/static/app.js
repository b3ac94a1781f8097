// Tracelake web UI: plain JavaScript, no build step, no library. It reads the JSON API under
// ../api/tracelake/v1 like any other client and draws one SVG.
//
// The client keeps a small graph: the focused asset (the root) and, for every box whose
// upstream or downstream side was expanded, the edges one hop away (GET /lineage depth=1,
// cached per filter setting). What is on screen is what the root reaches through expanded
// sides, so collapsing a side drops exactly the boxes reached only through it. Boxes sit in
// columns by signed distance from the root (upstream left, downstream right); a column
// shows at most PAGE boxes and a "+N more" group pages through the rest, so the DOM stays
// small however many nodes the client graph holds. The DOM is built with textContent and
// attributes only: URNs and labels come from whoever posted lineage.
"use strict";

const API = new URL("../api/tracelake/v1/", window.location.href);
const TOKEN_KEY = "tracelake.token";
const PAGE = 50; // boxes per column before a "+N more" group
const MAX_FIELDS = 40; // column rows per box before "N more columns"
const BOX_W = 250;
const COL_W = 370;
const HEADER_H = 42;
const CHIPS_H = 17;
const ROW_H = 18;
const GROUP_H = 34;
const V_GAP = 14;
const MARGIN = 40;
const ANCHOR_Y = 21; // where table edges meet a box, from its top

const SIGNALS = ["sql_static", "spark_runtime", "openlineage", "config", "probe", "manual", "ai_runtime"];
const TRANSFORMATIONS = [
  "IDENTITY", "TRANSFORMATION", "AGGREGATION", "FILTER", "JOIN", "GROUP_BY", "SORT", "WINDOW", "CONDITIONAL",
];
const SIGNAL_DASH = {
  sql_static: null, spark_runtime: "7 4", openlineage: "2 3", config: "10 3 2 3", probe: "1 4", ai_runtime: "6 2 1 2",
  manual: "12 6",
};
const CONFIDENCE_RANK = { LOW: 1, MEDIUM: 2, HIGH: 3 };

const state = {
  root: null,
  generation: 0, // bumped on every focus: late answers for an older root are dropped
  filterGen: 0, // bumped on every filter change: late answers for older filters are dropped
  nodes: new Map(), // urn → node JSON (kind, type, owner, layer, labels)
  cache: new Map(), // "urn|up" / "urn|down" → {edges}
  inflight: new Map(), // same keys → Promise
  expanded: new Set(), // the expanded sides
  levels: new Map(), // visible urn → signed level
  edges: [], // visible table edges
  adjacency: new Map(),
  pages: new Map(), // level → offset of its first shown box
  details: new Map(), // `${urn}|${as_of}` → GET /nodes/{urn}?as_of=…
  openColumns: new Set(),
  allFields: new Set(), // boxes showing every column
  selected: null,
  fieldLineage: null, // {start, depth, nodes, edges, related:Set}
  violations: null, // null: the server has no violations endpoint (or refused)
  layout: null,
  zoom: 1,
  busy: 0,
  detailLimit: 50,
  why: null, // {key, days, answer | error | loading}: GET /why for the selected node
  whyDays: "7", // the window last asked for, in days
  grouped: null, // {by, groups, edges}: the root's lineage collapsed to groups (the "Group by" toggle)
  openGroups: new Set(), // group ids shown with their members
};

// ------------------------------------------------------------------ small helpers

const $ = (selector) => document.querySelector(selector);
const SVG_NS = "http://www.w3.org/2000/svg";

function svg(tag, attrs = {}, parent = null, text = null) {
  const element = document.createElementNS(SVG_NS, tag);
  for (const [name, value] of Object.entries(attrs)) {
    if (value !== null && value !== undefined && value !== false) element.setAttribute(name, String(value));
  }
  if (text !== null) element.textContent = text;
  if (parent) parent.appendChild(element);
  return element;
}

function html(tag, attrs = {}, parent = null, text = null) {
  const element = document.createElement(tag);
  for (const [name, value] of Object.entries(attrs)) {
    if (value === null || value === undefined || value === false) continue;
    if (name === "class") element.className = value;
    else element.setAttribute(name, String(value));
  }
  if (text !== null) element.textContent = text;
  if (parent) parent.appendChild(element);
  return element;
}

const assetOf = (urn) => urn.split("#")[0];
const isField = (urn) => urn.includes("#");
const kindOf = (urn) => assetOf(urn).split("/")[0];
function shortName(urn) {
  if (isField(urn)) return urn.slice(urn.indexOf("#") + 1);
  const slash = urn.indexOf("/");
  return slash >= 0 ? urn.slice(slash + 1) : urn;
}
function truncate(text, length) {
  return text.length > length ? `${text.slice(0, length - 1)}…` : text;
}
const sideKey = (urn, dir) => `${urn}|${dir}`;
const edgeKey = (e) => `${e.source}|${e.target}|${e.process}|${e.signal}|${e.transformation ?? ""}`;

function setBusy(delta) {
  state.busy += delta;
  document.body.dataset.busy = state.busy > 0 ? "true" : "false";
  $('[data-testid="busy"]').hidden = state.busy <= 0;
}

let errorTimer = null;
function showError(error) {
  const banner = $('[data-testid="error"]');
  banner.textContent = error instanceof Error ? error.message : String(error);
  banner.hidden = false;
  clearTimeout(errorTimer);
  errorTimer = setTimeout(() => { banner.hidden = true; }, 10000);
}

// ------------------------------------------------------------------ the API

let tokenRequest = null;
function askToken() {
  if (tokenRequest) return tokenRequest;
  const dialog = $("#token-dialog");
  const input = $("#token-input");
  input.value = localStorage.getItem(TOKEN_KEY) || "";
  tokenRequest = new Promise((resolve) => {
    dialog.addEventListener("close", () => {
      const token = input.value.trim();
      if (token) localStorage.setItem(TOKEN_KEY, token);
      tokenRequest = null;
      resolve(token);
    }, { once: true });
  });
  dialog.showModal();
  return tokenRequest;
}

/**
 * GET a JSON document from the API; arrays become repeated parameters. A 401 asks for a token
 * (kept in localStorage) and retries once, unless `ask` is false.
 */
async function fetchJSON(path, params = {}, { ask = true, retried = false } = {}) {
  const url = new URL(path, API);
  for (const [name, value] of Object.entries(params)) {
    if (value === undefined || value === null || value === "" || value === false) continue;
    for (const item of Array.isArray(value) ? value : [value]) url.searchParams.append(name, String(item));
  }
  const headers = { Accept: "application/json" };
  const token = localStorage.getItem(TOKEN_KEY);
  if (token) headers.Authorization = `Bearer ${token}`;
  setBusy(+1);
  try {
    const response = await fetch(url, { headers });
    if (response.status === 401 && ask && !retried) {
      if (await askToken()) {
        if (!state.violations) loadViolations(); // these did not ask: try again with the token
        if (!$("#kinds input")) loadKinds();
        return fetchJSON(path, params, { ask, retried: true });
      }
    }
    if (!response.ok) {
      let message = `${response.status} ${response.statusText}`;
      try {
        const body = await response.json();
        if (body.error) message = body.error;
        else if (typeof body.detail === "string") message = body.detail;
        else if (body.detail) message = JSON.stringify(body.detail);
      } catch { /* not JSON */ }
      const error = new Error(message);
      error.status = response.status;
      throw error;
    }
    return await response.json();
  } finally {
    setBusy(-1);
  }
}

function filterParams() {
  const params = {};
  const confidence = $("#min-confidence").value;
  if (confidence) params.min_confidence = confidence;
  const signals = checked("#signals");
  if (signals.length && signals.length < SIGNALS.length) params.signal = signals;
  const transformations = checked("#transformations");
  if (transformations.length && transformations.length < TRANSFORMATIONS.length) {
    params.transformation = transformations;
  }
  const kinds = checked("#kinds");
  // none ticked: ask for a kind no asset has, so the walk steps nowhere
  if (kinds.length < document.querySelectorAll("#kinds input").length) params.kind = kinds.length ? kinds : [""];
  const asOf = asOfParam();
  if (asOf) params.as_of = asOf;
  if ($("#direct-only").checked) params.direct_only = true;
  return params;
}

function asOfParam() {
  const day = $("#as-of").value;
  return day ? `${day}T23:59:59Z` : null; // the graph as it was at the end of that day (UTC)
}

function checked(container) {
  return [...document.querySelectorAll(`${container} input:checked`)].map((box) => box.value);
}

const noSignal = () => checked("#signals").length === 0;
const noTransformation = () => checked("#transformations").length === 0;

function mergeNode(node) {
  const known = state.nodes.get(node.id) || {};
  const merged = { ...known, ...node };
  delete merged.distance;
  state.nodes.set(node.id, merged);
}

// ------------------------------------------------------------------ the client graph

/** One hop of table lineage from `urn` on one side, fetched once per filter setting. */
function ensureSide(urn, dir) {
  const key = sideKey(urn, dir);
  if (state.cache.has(key)) return Promise.resolve();
  if (state.inflight.has(key)) return state.inflight.get(key);
  const filterGen = state.filterGen;
  const load = (async () => {
    let edges = [];
    if (!noSignal()) {
      const view = await fetchJSON("lineage", {
        node: urn, direction: dir === "up" ? "upstream" : "downstream", depth: 1, ...filterParams(),
      });
      if (filterGen !== state.filterGen) return;
      for (const node of view.nodes) mergeNode(node);
      edges = view.edges.filter((e) => (dir === "up" ? e.target === urn : e.source === urn));
    }
    state.cache.set(key, { edges });
  })().finally(() => {
    if (state.inflight.get(key) === load) state.inflight.delete(key);
  });
  state.inflight.set(key, load);
  return load;
}

/** What the root reaches through expanded sides: levels, edges, adjacency; prunes the rest. */
function recompute() {
  const levels = new Map();
  const edges = new Map();
  if (state.root) {
    levels.set(state.root, 0);
    const order = [state.root];
    for (let i = 0; i < order.length; i++) {
      const urn = order[i];
      const level = levels.get(urn);
      for (const dir of ["up", "down"]) {
        const key = sideKey(urn, dir);
        if (!state.expanded.has(key)) continue;
        const side = state.cache.get(key);
        if (!side) continue;
        for (const edge of side.edges) {
          edges.set(edgeKey(edge), edge);
          const other = dir === "up" ? edge.source : edge.target;
          if (!levels.has(other)) {
            levels.set(other, level + (dir === "up" ? -1 : 1));
            order.push(other);
          }
        }
      }
    }
  }
  for (const key of [...state.expanded]) {
    if (!levels.has(key.slice(0, key.lastIndexOf("|")))) state.expanded.delete(key);
  }
  layer(levels, edges, state.root);
  const adjacency = new Map();
  const link = (a, b) => {
    let list = adjacency.get(a);
    if (!list) adjacency.set(a, (list = []));
    list.push(b);
  };
  for (const edge of edges.values()) {
    link(edge.source, edge.target);
    link(edge.target, edge.source);
  }
  state.levels = levels;
  state.edges = [...edges.values()];
  state.adjacency = adjacency;
}

/**
 * Longest-path layering on each side of the root, so that every edge points right: a table
 * that feeds the root directly and through an upstream box sits left of that box. Levels
 * only move away from the root; on a cycle (no fixed point) the BFS levels stay.
 */
function layer(levels, edges, root) {
  const bfs = new Map(levels);
  const passes = Math.min(levels.size, 100) + 1;
  for (let pass = 0; pass < passes; pass++) {
    let changed = false;
    for (const edge of edges.values()) {
      const source = levels.get(edge.source);
      const target = levels.get(edge.target);
      if (source <= 0 && target <= 0 && edge.source !== root && source > target - 1) {
        levels.set(edge.source, target - 1);
        changed = true;
      } else if (source >= 0 && target >= 0 && edge.target !== root && target < source + 1) {
        levels.set(edge.target, source + 1);
        changed = true;
      }
    }
    if (!changed) return;
  }
  for (const [urn, level] of bfs) levels.set(urn, level);
}

function levelSpan() {
  let low = 0;
  let high = 0;
  for (const level of state.levels.values()) {
    low = Math.min(low, level);
    high = Math.max(high, level);
  }
  return Math.min(Math.max(high - low, 1), 25);
}

// ------------------------------------------------------------------ actions

async function focus(urn) {
  const generation = ++state.generation;
  Object.assign(state, {
    root: urn, pages: new Map(), openColumns: new Set(), allFields: new Set(), selected: null,
    details: new Map(), // a new exploration reads the current graph afresh
    fieldLineage: null, expanded: new Set([sideKey(urn, "up"), sideKey(urn, "down")]),
    grouped: null, openGroups: new Set(),
  });
  if (!state.nodes.has(urn)) mergeNode({ id: urn, kind: "asset", type: kindOf(urn), labels: [] });
  window.history.replaceState(null, "", `#node=${encodeURIComponent(urn)}`);
  $('[data-testid="focus-title"]').textContent = urn;
  $("#empty").hidden = true;
  recompute();
  render({ center: true });
  try {
    await Promise.all([ensureSide(urn, "up"), ensureSide(urn, "down")]);
  } catch (error) {
    showError(error);
  }
  if (generation !== state.generation) return;
  recompute();
  render({ center: true });
  select(urn, { openColumns: false });
  if ($("#group-by").value) await loadGrouped();
}

async function toggleSide(urn, dir) {
  const key = sideKey(urn, dir);
  if (state.expanded.has(key)) {
    state.expanded.delete(key);
    recompute();
    render({ anchor: urn });
    return;
  }
  const generation = state.generation;
  state.expanded.add(key);
  render({ anchor: urn });
  try {
    await ensureSide(urn, dir);
  } catch (error) {
    state.expanded.delete(key);
    showError(error);
  }
  if (generation !== state.generation) return;
  recompute();
  render({ anchor: urn });
  if (state.fieldLineage && levelSpan() > state.fieldLineage.depth) await loadFieldLineage();
}

// A node's details as of the date picked (its edges then; its properties and fields as now).
const detailsKey = (urn) => `${urn}|${asOfParam() || ""}`;
const detailsOf = (urn) => state.details.get(detailsKey(urn));

async function ensureDetails(urn) {
  const key = detailsKey(urn);
  if (state.details.has(key)) return state.details.get(key);
  const details = await fetchJSON(`nodes/${encodeURIComponent(urn)}`, { as_of: asOfParam() });
  state.details.set(key, details);
  if (!isField(urn)) {
    mergeNode({
      id: urn, kind: details.kind, type: details.type, owner: details.owner, layer: details.layer,
      labels: details.labels,
    });
  }
  return details;
}

async function setColumns(urn, open) {
  if (!open) {
    state.openColumns.delete(urn);
    render({ anchor: urn });
    return;
  }
  state.openColumns.add(urn);
  render({ anchor: urn });
  try {
    await ensureDetails(urn);
  } catch (error) {
    state.openColumns.delete(urn);
    showError(error);
  }
  render({ anchor: urn });
}

async function select(urn, { openColumns = true } = {}) {
  const wasSelected = state.selected === urn;
  state.selected = urn;
  state.detailLimit = 50;
  if (isField(urn)) {
    state.fieldLineage = null;
    render();
    renderDetails();
    await loadFieldLineage();
  } else {
    state.fieldLineage = null;
    if (openColumns) {
      const open = wasSelected ? !state.openColumns.has(urn) : true;
      await setColumns(urn, open);
    } else {
      render();
    }
  }
  try {
    await ensureDetails(urn);
  } catch (error) {
    showError(error);
  }
  if (state.selected === urn) renderDetails();
}

async function loadFieldLineage() {
  const start = state.selected;
  if (!start || !isField(start)) return;
  const depth = levelSpan();
  let view = { nodes: [], edges: [] };
  if (!noSignal() && !noTransformation()) {
    try {
      view = await fetchJSON("lineage", { node: start, direction: "both", depth, ...filterParams() });
    } catch (error) {
      showError(error);
      return;
    }
  }
  if (state.selected !== start) return;
  state.fieldLineage = {
    start, depth, nodes: view.nodes, edges: view.edges, related: new Set(view.nodes.map((n) => n.id)),
  };
  const assets = [...new Set(view.nodes.map((n) => assetOf(n.id)))].filter((a) => state.levels.has(a));
  for (const asset of assets.slice(0, 30)) state.openColumns.add(asset);
  render();
  await Promise.all(assets.slice(0, 30).map((asset) => ensureDetails(asset).catch(() => null)));
  if (state.selected !== start) return;
  render();
  renderDetails();
}

async function goto(urn) {
  const asset = assetOf(urn);
  if (!state.levels.has(asset)) await focus(asset);
  scrollToNode(asset);
  await select(urn, { openColumns: !isField(urn) });
}

async function onFiltersChanged() {
  state.filterGen += 1;
  state.cache.clear();
  state.inflight.clear();
  const generation = state.generation;
  try {
    await Promise.all([...state.expanded].map((key) => {
      const cut = key.lastIndexOf("|");
      return ensureSide(key.slice(0, cut), key.slice(cut + 1));
    }));
  } catch (error) {
    showError(error);
  }
  if (generation !== state.generation) return;
  // a side whose refetch failed stays expanded, showing nothing until the next change
  recompute();
  render();
  if (state.selected && isField(state.selected)) await loadFieldLineage();
  // details (and the columns they list) are kept per as-of date: read those now on screen
  const shown = new Set(state.openColumns);
  if (state.selected) shown.add(state.selected);
  try {
    await Promise.all([...shown].map((urn) => ensureDetails(urn)));
  } catch (error) {
    showError(error);
  }
  if (generation !== state.generation) return;
  if (state.grouped) await loadGrouped();
  render();
  renderDetails();
}

async function loadViolations() {
  try {
    const document_ = await fetchJSON("policies/violations", {}, { ask: false });
    const list = Array.isArray(document_) ? document_ : (document_ && document_.violations) || [];
    const violations = list.map((v) => ({
      policy: String(v.policy ?? ""),
      kind: String(v.kind ?? ""),
      message: String(v.message ?? v.violation ?? ""),
      path: Array.isArray(v.path) ? v.path.map(String)
        : typeof v.path === "string" ? v.path.split(/\s*→\s*/) : [],
    }));
    const marked = new Set();
    for (const v of violations) for (const urn of v.path) { marked.add(urn); marked.add(assetOf(urn)); }
    state.violations = { list: violations, marked };
  } catch {
    state.violations = null; // no endpoint (404), not allowed, or no policies configured
  }
  renderViolations();
  render();
}

// ------------------------------------------------------------------ layout

function visibleFields(urn) {
  const details = detailsOf(urn);
  if (!details) return { rows: [], hidden: 0, loading: true };
  const fields = details.fields || [];
  if (state.allFields.has(urn) || fields.length <= MAX_FIELDS) return { rows: fields, hidden: 0 };
  const related = state.fieldLineage ? state.fieldLineage.related : new Set();
  const rows = fields.filter((f, i) => i < MAX_FIELDS || related.has(f.id) || f.id === state.selected);
  return { rows, hidden: fields.length - rows.length };
}

function boxHeight(urn) {
  const node = state.nodes.get(urn) || {};
  let height = HEADER_H + ((node.labels || []).length ? CHIPS_H : 0);
  if (state.openColumns.has(urn)) {
    const { rows, hidden, loading } = visibleFields(urn);
    height += (loading ? 1 : rows.length + (hidden ? 1 : 0) || 1) * ROW_H + 8;
  }
  return height;
}

function layout() {
  const byLevel = new Map();
  for (const [urn, level] of state.levels) {
    if (!byLevel.has(level)) byLevel.set(level, []);
    byLevel.get(level).push(urn);
  }
  const levels = [...byLevel.keys()].sort((a, b) => Math.abs(a) - Math.abs(b) || a - b);
  const index = new Map();
  for (const level of levels) {
    const list = byLevel.get(level);
    if (level === 0) {
      list.sort((a, b) => (a === state.root ? -1 : b === state.root ? 1 : a < b ? -1 : a > b ? 1 : 0));
    } else {
      const weight = new Map();
      for (const urn of list) {
        let sum = 0;
        let count = 0;
        for (const other of state.adjacency.get(urn) || []) {
          // boxes nearer the root are placed already: sit near the ones this box is linked to
          if (index.has(other) && Math.abs(state.levels.get(other)) < Math.abs(level)) {
            sum += index.get(other);
            count += 1;
          }
        }
        weight.set(urn, count ? sum / count : Number.MAX_SAFE_INTEGER);
      }
      list.sort((a, b) => weight.get(a) - weight.get(b) || (a < b ? -1 : a > b ? 1 : 0));
    }
    list.forEach((urn, i) => index.set(urn, i));
  }

  const sorted = [...byLevel.keys()].sort((a, b) => a - b);
  const low = sorted.length ? sorted[0] : 0;
  const high = sorted.length ? sorted[sorted.length - 1] : 0;
  const columns = [];
  let tallest = 0;
  for (const level of sorted) {
    const list = byLevel.get(level);
    let offset = Math.max(0, Math.min(state.pages.get(level) || 0, list.length - 1));
    offset -= offset % PAGE;
    const items = [];
    if (offset > 0) items.push({ group: "prev", level, count: offset, height: GROUP_H });
    for (const urn of list.slice(offset, offset + PAGE)) items.push({ urn, level, height: boxHeight(urn) });
    const rest = list.length - offset - PAGE;
    if (rest > 0) items.push({ group: "more", level, count: rest, height: GROUP_H });
    const height = items.reduce((sum, item) => sum + item.height, 0) + V_GAP * (items.length - 1);
    tallest = Math.max(tallest, height);
    columns.push({ level, list, offset, items, height });
  }

  const boxes = new Map(); // urn → {x, y, h, level}
  const groups = new Map(); // "level|prev|more" → {x, y, h, count}
  const hiddenIn = new Map(); // paged-out urn → group key
  const fieldY = new Map();
  for (const column of columns) {
    const x = MARGIN + (column.level - low) * COL_W;
    let y = MARGIN + (tallest - column.height) / 2;
    for (const item of column.items) {
      if (item.group) {
        groups.set(`${item.level}|${item.group}`, { ...item, x, y, h: item.height });
      } else {
        boxes.set(item.urn, { x, y, h: item.height, level: item.level });
        if (state.openColumns.has(item.urn)) {
          const top = y + HEADER_H + ((state.nodes.get(item.urn)?.labels || []).length ? CHIPS_H : 0) + 4;
          visibleFields(item.urn).rows.forEach((f, i) => fieldY.set(f.id, top + i * ROW_H + ROW_H / 2));
        }
      }
      y += item.height + V_GAP;
    }
    column.list.forEach((urn, i) => {
      if (i < column.offset) hiddenIn.set(urn, `${column.level}|prev`);
      else if (i >= column.offset + PAGE) hiddenIn.set(urn, `${column.level}|more`);
    });
  }
  return {
    boxes, groups, hiddenIn, fieldY,
    width: MARGIN * 2 + (high - low) * COL_W + BOX_W,
    height: MARGIN * 2 + tallest,
  };
}

// ------------------------------------------------------------------ drawing

function curve(x1, y1, x2, y2) {
  const bend = Math.max(50, Math.abs(x2 - x1) / 2);
  return `M${x1},${y1} C${x1 + bend},${y1} ${x2 - bend},${y2} ${x2},${y2}`;
}

function edgeTitle(e) {
  const parts = [`${e.source} → ${e.target}`, `process: ${e.process}`, `signal: ${e.signal}`,
    `confidence: ${e.confidence}`];
  if (e.transformation) parts.push(`transformation: ${e.transformation}${e.direct ? " (direct)" : ""}`);
  parts.push(`since ${e.valid_from}${e.valid_to ? ` until ${e.valid_to}` : ""}`);
  return parts.join("\n");
}

function screenPosition(urn) {
  const box = state.layout && state.layout.boxes.get(urn);
  if (!box) return null;
  const graph = $("#graph");
  const canvas = $("#canvas");
  return {
    x: graph.offsetLeft + box.x * state.zoom - canvas.scrollLeft,
    y: graph.offsetTop + box.y * state.zoom - canvas.scrollTop,
  };
}

/** Redraw everything; `anchor` keeps that box where it was on screen, `center` centres the root. */
function render({ center = false, anchor = null } = {}) {
  if (state.grouped) {
    renderGrouped();
    return;
  }
  const graph = $("#graph");
  const canvas = $("#canvas");
  const before = anchor ? screenPosition(anchor) : null;
  const laid = layout();
  state.layout = laid;
  graph.replaceChildren();
  graph.setAttribute("viewBox", `0 0 ${laid.width} ${laid.height}`);
  graph.setAttribute("width", String(Math.round(laid.width * state.zoom)));
  graph.setAttribute("height", String(Math.round(laid.height * state.zoom)));
  svg("rect", { class: "background", x: 0, y: 0, width: laid.width, height: laid.height }, graph);

  const tableLayer = svg("g", { class: "edges" + (state.fieldLineage ? " dimmed" : "") }, graph);
  const fieldLayer = svg("g", { class: "field-edges" }, graph);
  const nodeLayer = svg("g", { class: "nodes" }, graph);

  // table edges: box to box, or one aggregated curve to a "+N more" group
  const parallel = new Map();
  const aggregated = new Map();
  let drawn = 0;
  for (const edge of state.edges) {
    const source = laid.boxes.get(edge.source);
    const target = laid.boxes.get(edge.target);
    if (!source || !target) {
      const from = source ? edge.source : laid.hiddenIn.get(edge.source);
      const to = target ? edge.target : laid.hiddenIn.get(edge.target);
      if (from && to && (source || target)) {
        const key = `${from}→${to}`;
        aggregated.set(key, { from, to, count: (aggregated.get(key)?.count || 0) + 1 });
      }
      continue;
    }
    const pair = `${edge.source}→${edge.target}`;
    const nth = parallel.get(pair) || 0;
    parallel.set(pair, nth + 1);
    const shift = nth * 4;
    const path = svg("path", {
      class: `edge conf-${edge.confidence}`,
      d: curve(source.x + BOX_W, source.y + ANCHOR_Y + shift, target.x, target.y + ANCHOR_Y + shift),
      "stroke-dasharray": SIGNAL_DASH[edge.signal] || null,
      "data-testid": "edge", "data-source": edge.source, "data-target": edge.target,
      "data-signal": edge.signal, "data-confidence": edge.confidence,
    }, tableLayer);
    svg("title", {}, path, edgeTitle(edge));
    drawn += 1;
  }
  for (const { from, to, count } of aggregated.values()) {
    const a = laid.boxes.get(from) || laid.groups.get(from);
    const b = laid.boxes.get(to) || laid.groups.get(to);
    if (!a || !b) continue;
    const path = svg("path", {
      class: "edge aggregate", "stroke-width": Math.min(1.5 + Math.log2(count), 8),
      d: curve(a.x + BOX_W, a.y + ANCHOR_Y, b.x, b.y + Math.min(ANCHOR_Y, b.h / 2)),
    }, tableLayer);
    svg("title", {}, path, `${count} edges to boxes not shown`);
  }

  // column edges of the selected column's lineage, row to row
  let fieldEdges = 0;
  if (state.fieldLineage) {
    const parallelFields = new Map();
    for (const edge of state.fieldLineage.edges) {
      const source = laid.boxes.get(assetOf(edge.source));
      const target = laid.boxes.get(assetOf(edge.target));
      if (!source || !target) continue;
      const y1 = laid.fieldY.get(edge.source) ?? source.y + ANCHOR_Y;
      const y2 = laid.fieldY.get(edge.target) ?? target.y + ANCHOR_Y;
      const pair = `${edge.source}→${edge.target}`;
      const nth = parallelFields.get(pair) || 0;
      parallelFields.set(pair, nth + 1);
      const d = source === target
        ? `M${source.x + BOX_W},${y1} C${source.x + BOX_W + 60},${y1} ${source.x + BOX_W + 60},${y2} `
          + `${source.x + BOX_W},${y2}`
        : curve(source.x + BOX_W, y1 + nth * 2, target.x, y2 + nth * 2);
      const path = svg("path", {
        class: `field-edge conf-${edge.confidence}${edge.direct === false ? " indirect" : ""}`, d,
        "stroke-dasharray": SIGNAL_DASH[edge.signal] || null,
        "data-testid": "field-edge", "data-source": edge.source, "data-target": edge.target,
        "data-transformation": edge.transformation || "",
      }, fieldLayer);
      svg("title", {}, path, edgeTitle(edge));
      fieldEdges += 1;
    }
  }

  for (const [urn, box] of laid.boxes) drawBox(nodeLayer, urn, box);
  for (const [key, group] of laid.groups) drawGroup(nodeLayer, key, group);

  $('[data-testid="node-count"]').textContent = String(state.levels.size);
  $('[data-testid="edge-count"]').textContent = String(state.edges.length);
  $('[data-testid="field-edge-count"]').textContent = String(fieldEdges);
  graph.dataset.drawnEdges = String(drawn);
  if (center && state.root) scrollToNode(state.root);
  else if (before) {
    const after = screenPosition(anchor);
    if (after) {
      canvas.scrollLeft += after.x - before.x;
      canvas.scrollTop += after.y - before.y;
    }
  }
}

// ------------------------------------------------------------------ groups

const GROUP_W = 260;
const MEMBERS_SHOWN = 30;

/** The root's lineage (both ways, the filters in force) collapsed by the "Group by" choice. */
async function loadGrouped() {
  const by = $("#group-by").value;
  if (!by || !state.root) {
    state.grouped = null;
    render({ center: true });
    return;
  }
  const generation = state.generation;
  const params = { ...filterParams(), node: state.root, direction: "both", group_by: by };
  let answer;
  try {
    answer = await fetchJSON("lineage", params);
  } catch (error) {
    showError(error);
    return;
  }
  if (generation !== state.generation || $("#group-by").value !== by) return;
  state.grouped = { by, groups: answer.groups, edges: answer.edges };
  render();
}

/** Groups in columns by their longest chain of flows from a group nothing flows into. */
function groupLayout() {
  const { groups, edges } = state.grouped;
  const level = new Map(groups.map((g) => [g.id, 0]));
  for (let round = 0; round < groups.length; round += 1) { // longest path, cycles cut at n rounds
    let moved = false;
    for (const e of edges) {
      if (level.get(e.target) < level.get(e.source) + 1) {
        level.set(e.target, level.get(e.source) + 1);
        moved = true;
      }
    }
    if (!moved) break;
  }
  const boxes = new Map();
  const heights = new Map();
  for (const g of groups) {
    const column = level.get(g.id);
    const open = state.openGroups.has(g.id);
    const rows = open ? Math.min(g.members.length, MEMBERS_SHOWN) + (g.members.length > MEMBERS_SHOWN ? 1 : 0) : 0;
    const h = HEADER_H + 8 + rows * ROW_H;
    const y = heights.get(column) ?? MARGIN;
    boxes.set(g.id, { x: MARGIN + column * COL_W, y, h, group: g, open });
    heights.set(column, y + h + V_GAP);
  }
  const columns = Math.max(0, ...level.values()) + 1;
  return { boxes, width: MARGIN * 2 + columns * COL_W, height: Math.max(MARGIN, ...heights.values()) + MARGIN };
}

function renderGrouped() {
  const graph = $("#graph");
  const laid = groupLayout();
  graph.replaceChildren();
  graph.setAttribute("viewBox", `0 0 ${laid.width} ${laid.height}`);
  graph.setAttribute("width", String(Math.round(laid.width * state.zoom)));
  graph.setAttribute("height", String(Math.round(laid.height * state.zoom)));
  svg("rect", { class: "background", x: 0, y: 0, width: laid.width, height: laid.height }, graph);
  const edgeLayer = svg("g", { class: "edges" }, graph);
  for (const e of state.grouped.edges) {
    const a = laid.boxes.get(e.source);
    const b = laid.boxes.get(e.target);
    if (!a || !b) continue;
    const path = svg("path", {
      class: "edge group-edge", "stroke-width": Math.min(1.5 + Math.log2(e.flows), 8),
      d: curve(a.x + GROUP_W, a.y + ANCHOR_Y, b.x, b.y + ANCHOR_Y),
      "data-testid": "group-edge", "data-source": e.source, "data-target": e.target, "data-flows": e.flows,
    }, edgeLayer);
    svg("title", {}, path, `${e.flows} table flow${e.flows === 1 ? "" : "s"}`);
    svg("text", { class: "edge-count", x: (a.x + GROUP_W + b.x) / 2, y: (a.y + b.y) / 2 + ANCHOR_Y - 4 },
      edgeLayer, String(e.flows));
  }
  const nodeLayer = svg("g", { class: "nodes" }, graph);
  for (const [id, box] of laid.boxes) {
    const g = box.group;
    const node = svg("g", {
      class: `node cluster${g.holds_start ? " root" : ""}`, "data-testid": "group", "data-group": id,
      "data-size": g.members.length, transform: `translate(${box.x},${box.y})`,
    }, nodeLayer);
    svg("rect", { class: "box", width: GROUP_W, height: box.h, rx: 6 }, node);
    svg("text", { class: "name", x: 10, y: 18 }, node, truncate(`${state.grouped.by}: ${g.value}`, 32));
    const inside = g.internal_flows ? ` · ${g.internal_flows} flows inside` : "";
    svg("text", { class: "kind", x: 10, y: 34 }, node, `${g.members.length} assets${inside}`);
    const toggle = svg("g", { class: "toggle", "data-action": "toggle-group", "data-group": id,
      "data-testid": "group-toggle", transform: `translate(${GROUP_W - 26},6)` }, node);
    svg("rect", { width: 20, height: 20, rx: 4 }, toggle);
    svg("text", { x: 10, y: 15, "text-anchor": "middle" }, toggle, box.open ? "−" : "+");
    if (!box.open) continue;
    g.members.slice(0, MEMBERS_SHOWN).forEach((member, i) => {
      svg("text", { class: "field", x: 14, y: HEADER_H + 14 + i * ROW_H, "data-action": "open-member",
        "data-urn": member, "data-testid": "group-member" }, node, truncate(shortName(member), 36));
    });
    if (g.members.length > MEMBERS_SHOWN) {
      svg("text", { class: "muted", x: 14, y: HEADER_H + 14 + MEMBERS_SHOWN * ROW_H }, node,
        `… ${g.members.length - MEMBERS_SHOWN} more`);
    }
  }
  $('[data-testid="node-count"]').textContent = String(state.grouped.groups.length);
  $('[data-testid="edge-count"]').textContent = String(state.grouped.edges.length);
  $('[data-testid="field-edge-count"]').textContent = "0";
}

function drawBox(parent, urn, box) {
  const node = state.nodes.get(urn) || { id: urn, type: kindOf(urn), labels: [] };
  const labels = node.labels || [];
  const violated = state.violations && state.violations.marked.has(urn);
  const classes = ["node"];
  if (urn === state.root) classes.push("root");
  if (urn === state.selected || (state.selected && assetOf(state.selected) === urn)) classes.push("selected");
  if (violated) classes.push("violation");
  if (state.fieldLineage && state.fieldLineage.related.has(urn)) classes.push("related");
  const g = svg("g", {
    class: classes.join(" "), transform: `translate(${box.x},${box.y})`,
    "data-testid": "node", "data-urn": urn, "data-level": box.level,
  }, parent);
  svg("rect", { class: "box", width: BOX_W, height: box.h, rx: 6 }, g);
  const header = svg("rect", {
    class: "header", width: BOX_W, height: HEADER_H, rx: 6, "data-action": "select-node",
    "data-testid": "node-header",
  }, g);
  svg("title", {}, header, urn);
  svg("text", { class: "name", x: 14, y: 18 }, g, truncate(shortName(urn), 31));
  const sub = [node.type || kindOf(urn), node.layer, node.owner].filter(Boolean).join(" · ");
  svg("text", { class: "sub", x: 14, y: 34 }, g, truncate(sub, 30));
  const open = state.openColumns.has(urn);
  svg("text", {
    class: "columns-toggle", x: BOX_W - 10, y: 34, "text-anchor": "end", "data-action": "toggle-columns",
    "data-testid": "toggle-columns",
  }, g, open ? "▾ columns" : "▸ columns");
  if (labels.length) drawChips(g, labels, 14, HEADER_H - 2, BOX_W - 28);

  for (const dir of ["up", "down"]) {
    const key = sideKey(urn, dir);
    const expanded = state.expanded.has(key);
    const side = state.cache.get(key);
    const pending = expanded && !side;
    const none = expanded && side && side.edges.length === 0;
    const button = svg("g", {
      class: `toggle${none ? " none" : ""}${pending ? " pending" : ""}`,
      transform: `translate(${dir === "up" ? 0 : BOX_W},${ANCHOR_Y})`,
      "data-action": `toggle-${dir}`, "data-testid": dir === "up" ? "toggle-upstream" : "toggle-downstream",
      "data-expanded": expanded ? "true" : "false",
    }, g);
    svg("circle", { r: 9 }, button);
    svg("text", { y: 4, "text-anchor": "middle" }, button, pending ? "…" : expanded ? "−" : "+");
    const what = dir === "up" ? "upstream" : "downstream";
    svg("title", {}, button, none ? `no ${what} (with these filters)`
      : `${expanded ? "collapse" : "expand"} one level ${what}`);
  }

  if (open) {
    const top = HEADER_H + (labels.length ? CHIPS_H : 0) + 4;
    const { rows, hidden, loading } = visibleFields(urn);
    if (loading) svg("text", { class: "sub", x: 14, y: top + 13 }, g, "loading columns…");
    else if (!rows.length) svg("text", { class: "sub", x: 14, y: top + 13 }, g, "no known columns");
    const related = state.fieldLineage ? state.fieldLineage.related : new Set();
    rows.forEach((field, i) => {
      const rowClasses = ["field"];
      if (field.id === state.selected) rowClasses.push("selected");
      else if (related.has(field.id)) rowClasses.push("related");
      if (state.violations && state.violations.marked.has(field.id)) rowClasses.push("violation");
      const row = svg("g", {
        class: rowClasses.join(" "), transform: `translate(0,${top + i * ROW_H})`,
        "data-action": "select-field", "data-testid": "field-row", "data-urn": field.id,
      }, g);
      svg("rect", { x: 4, width: BOX_W - 8, height: ROW_H - 2, rx: 3 }, row);
      const name = svg("text", { x: 14, y: 12.5 }, row);
      if ((field.labels || []).length) svg("tspan", { class: "label-dot" }, name, "● ");
      name.append(truncate(shortName(field.id), 24));
      if (field.data_type) {
        svg("text", { class: "type", x: BOX_W - 12, y: 12.5, "text-anchor": "end" }, row,
          truncate(field.data_type, 12));
      }
      const tip = [field.id, field.data_type, (field.labels || []).join(", ")].filter(Boolean).join("\n");
      svg("title", {}, row, tip);
    });
    if (hidden) {
      svg("text", {
        class: "more-fields", x: 14, y: top + rows.length * ROW_H + 12.5, "data-action": "all-fields",
        "data-testid": "more-fields",
      }, g, `… ${hidden} more columns`);
    }
  }
}

function drawChips(parent, labels, x, y, width) {
  let offset = 0;
  labels.forEach((label, i) => {
    if (offset < 0) return;
    const text = truncate(label, 18);
    const w = text.length * 6 + 12;
    if (offset + w > width) {
      const more = svg("g", { class: "chip", transform: `translate(${x + offset},${y})` }, parent);
      svg("text", { x: 2, y: 11 }, more, `+${labels.length - i}`);
      offset = -1;
      return;
    }
    const chip = svg("g", { class: "chip", transform: `translate(${x + offset},${y})`, "data-testid": "chip" },
      parent);
    svg("rect", { width: w, height: 14, rx: 7 }, chip);
    svg("text", { x: 6, y: 10.5 }, chip, text);
    offset += w + 4;
  });
}

function drawGroup(parent, key, group) {
  const next = group.group === "more";
  const g = svg("g", {
    class: "group", transform: `translate(${group.x},${group.y})`,
    "data-action": next ? "page-next" : "page-prev", "data-level": group.level,
    "data-testid": next ? "more-group" : "previous-group", "data-count": group.count,
  }, parent);
  svg("rect", { width: BOX_W, height: group.h, rx: 6 }, g);
  svg("text", { x: BOX_W / 2, y: group.h / 2 + 5, "text-anchor": "middle" }, g,
    next ? `+${group.count} more` : `▲ ${group.count} previous`);
}

function scrollToNode(urn) {
  const box = state.layout && state.layout.boxes.get(urn);
  if (!box) return;
  const canvas = $("#canvas");
  const graph = $("#graph");
  canvas.scrollLeft = Math.max(0, graph.offsetLeft + (box.x + BOX_W / 2) * state.zoom - canvas.clientWidth / 2);
  canvas.scrollTop = Math.max(0, graph.offsetTop + (box.y + box.h / 2) * state.zoom - canvas.clientHeight / 2);
}

// ------------------------------------------------------------------ side panels

function renderDetails() {
  const panel = $('[data-testid="details"]');
  panel.replaceChildren();
  const urn = state.selected;
  if (!urn) {
    html("div", { class: "placeholder" }, panel, "Select a box or a column to see its details.");
    return;
  }
  const details = detailsOf(urn);
  const node = details || state.nodes.get(urn) || { id: urn };
  html("h2", { "data-testid": "details-name" }, panel, shortName(urn));
  html("div", { class: "urn", "data-testid": "details-urn" }, panel, urn);

  const actions = html("div", { class: "actions" }, panel);
  if (assetOf(urn) !== state.root) {
    html("button", { type: "button", "data-focus": assetOf(urn), "data-testid": "focus-button" }, actions,
      "Focus lineage here");
  }
  if (!isField(urn)) {
    html("button", { type: "button", "data-columns": urn }, actions,
      state.openColumns.has(urn) ? "Hide columns" : "Show columns");
  }

  const facts = html("dl", { class: "facts" }, panel);
  const fact = (name, value) => {
    if (value === null || value === undefined || value === "") return;
    html("dt", {}, facts, name);
    html("dd", { "data-testid": `details-${name.replace(/\s+/g, "-")}` }, facts, String(value));
  };
  fact("kind", node.kind);
  fact("type", node.type);
  fact("data type", node.data_type);
  if (!isField(urn)) {
    fact("owner", node.owner ?? (details ? "—" : null));
    fact("layer", node.layer ?? (details ? "—" : null));
  }
  fact("security level", node.security_level);
  fact("description", node.description);

  const labels = node.labels || [];
  const chips = html("div", { class: "chips", "data-testid": "details-labels" }, panel);
  if (labels.length) for (const label of labels) html("span", { class: "chip" }, chips, label);
  else html("span", { class: "muted" }, chips, "no labels");

  if (state.violations) {
    const mine = state.violations.list.filter((v) => v.path.includes(urn) || v.path.some((p) => assetOf(p) === urn));
    if (mine.length) {
      html("h3", { class: "bad" }, panel, `Policy violations (${mine.length})`);
      const list = html("ul", { class: "violations-here" }, panel);
      for (const v of mine) html("li", {}, list, `${v.policy}: ${v.message}`);
    }
  }

  if (isField(urn)) renderColumnLineage(panel, urn);
  if (!details) {
    html("div", { class: "muted" }, panel, "loading…");
    return;
  }
  const day = $("#as-of").value;
  const when = day ? ` on ${day}` : "";
  renderFlows(panel, `Inputs${when}`, details.inputs || [], "source", "details-inputs");
  renderFlows(panel, `Outputs${when}`, details.outputs || [], "target", "details-outputs");
  if (node.kind !== "process") renderWhy(panel, urn);
}

// What changed upstream of the selected node, in the window that ends at the "as of" day (or now).
const WHY_WINDOWS = [["1", "the day before"], ["7", "7 days before"], ["30", "30 days before"], ["365", "a year before"]];
const whyKey = (urn) => `${urn}|${asOfParam() || ""}`;

function renderWhy(panel, urn) {
  html("h3", {}, panel, "What changed upstream");
  const form = html("div", { class: "why-form" }, panel);
  const select = html("select", { "data-testid": "why-window", "aria-label": "window" }, form);
  const current = state.why && state.why.key === whyKey(urn) ? state.why : null;
  for (const [days, label] of WHY_WINDOWS) {
    const option = html("option", { value: days }, select, label);
    if ((current ? current.days : state.whyDays) === days) option.selected = true;
  }
  const day = $("#as-of").value;
  html("span", { class: "muted" }, form, day ? ` ${day}` : " now");
  html("button", { type: "button", "data-why": urn, "data-testid": "why-button" }, form, "Find causes");
  if (!current) return;
  const box = html("div", { "data-testid": "why-panel" }, panel);
  if (current.loading) {
    html("div", { class: "muted" }, box, "walking upstream…");
    return;
  }
  if (current.error) {
    html("div", { class: "bad" }, box, current.error);
    return;
  }
  const answer = current.answer;
  html("div", { class: "muted", "data-testid": "why-summary" }, box,
    `${answer.found} change${answer.found === 1 ? "" : "s"} over ${answer.upstream_nodes} upstream nodes`);
  const list = html("ol", { class: "causes" }, box);
  for (const cause of answer.causes) {
    const item = html("li", { "data-testid": "why-cause", "data-kind": cause.kind, "data-subject": cause.subject }, list);
    const head = html("div", { class: "flow-head" }, item);
    html("span", { class: "chip" }, head, cause.kind.replace(/_/g, " "));
    html("span", { class: "tag", title: "severity × 0.8 per hop" }, head, cause.score.toFixed(2));
    html("div", { class: "process", title: cause.subject }, item,
      `${shortName(cause.subject)} · ${cause.at.slice(0, 16).replace("T", " ")} · ${cause.distance} hop${cause.distance === 1 ? "" : "s"}`);
    html("div", {}, item, cause.detail);
    if (cause.route.length) {
      const route = html("div", { class: "route" }, item);
      const stops = [cause.route[0].source, ...cause.route.map((hop) => hop.target)];
      stops.forEach((stop, i) => {
        if (i) html("span", { class: "muted" }, route, " → ");
        html("button", { type: "button", class: "urn-link", "data-goto": stop, title: stop }, route, shortName(stop));
      });
    }
  }
}

async function loadWhy(urn) {
  const days = $('[data-testid="why-window"]').value;
  state.whyDays = days;
  const key = whyKey(urn);
  const until = asOfParam() ? new Date(asOfParam()) : new Date();
  const since = new Date(until.getTime() - Number(days) * 86400000);
  state.why = { key, days, loading: true };
  renderDetails();
  const params = { node: urn, since: since.toISOString(), until: until.toISOString(), limit: 20 };
  let why;
  try {
    why = { key, days, answer: await fetchJSON("why", params) };
  } catch (error) {
    why = { key, days, error: String(error.message || error) };
  }
  if (state.why && state.why.key === key) {
    state.why = why;
    if (state.selected === urn) renderDetails();
  }
}

function renderColumnLineage(panel, urn) {
  const lineage = state.fieldLineage;
  html("h3", {}, panel, "Column lineage");
  if (!lineage || lineage.start !== urn) {
    html("div", { class: "muted" }, panel, "loading…");
    return;
  }
  const upstream = new Set();
  const downstream = new Set();
  const walk = (from, forward, into) => {
    const stack = [from];
    while (stack.length) {
      const current = stack.pop();
      for (const e of lineage.edges) {
        const [a, b] = forward ? [e.source, e.target] : [e.target, e.source];
        if (a === current && !into.has(b) && b !== urn) {
          into.add(b);
          stack.push(b);
        }
      }
    }
  };
  walk(urn, false, upstream);
  walk(urn, true, downstream);
  const hiddenEdges = lineage.edges.filter(
    (e) => !state.layout.boxes.has(assetOf(e.source)) || !state.layout.boxes.has(assetOf(e.target)),
  ).length;
  html("div", { class: "muted" }, panel,
    `${upstream.size} upstream, ${downstream.size} downstream columns within ${lineage.depth} hops`
    + (hiddenEdges ? `; ${hiddenEdges} edges reach boxes not on screen` : ""));
  for (const [title, set] of [["upstream", upstream], ["downstream", downstream]]) {
    if (!set.size) continue;
    const list = html("ul", { class: "columns", "data-testid": `column-${title}` }, panel);
    for (const other of [...set].sort().slice(0, 60)) {
      const item = html("li", {}, list);
      html("button", { type: "button", class: "urn-link", "data-goto": other, title: other }, item,
        `${shortName(assetOf(other))} · ${shortName(other)}`);
    }
  }
}

function renderFlows(panel, title, edges, end, testid) {
  html("h3", {}, panel, `${title} (${edges.length})`);
  if (!edges.length) {
    html("div", { class: "muted" }, panel, "none");
    return;
  }
  const list = html("ul", { class: "flows", "data-testid": testid }, panel);
  for (const e of edges.slice(0, state.detailLimit)) {
    const item = html("li", {}, list);
    const line = html("div", { class: "flow-head" }, item);
    html("button", { type: "button", class: "urn-link", "data-goto": e[end], title: e[end] }, line,
      isField(e[end]) ? `${shortName(assetOf(e[end]))} · ${shortName(e[end])}` : shortName(e[end]));
    const tags = html("div", { class: "tags" }, item);
    html("span", { class: `chip conf conf-${e.confidence}` }, tags, e.confidence);
    html("span", { class: "tag" }, tags, e.signal);
    if (e.transformation) html("span", { class: "tag" }, tags, e.transformation);
    html("div", { class: "process", title: e.process }, item, `via ${e.process}`);
  }
  if (edges.length > state.detailLimit) {
    html("button", { type: "button", class: "link", "data-more-details": "1" }, panel,
      `show ${Math.min(edges.length - state.detailLimit, 200)} more of ${edges.length - state.detailLimit}`);
  }
}

function renderViolations() {
  const section = $('[data-testid="violations"]');
  const list = $("#violation-list");
  list.replaceChildren();
  if (!state.violations) {
    section.hidden = true;
    return;
  }
  section.hidden = false;
  if (!state.violations.list.length) html("li", { class: "muted" }, list, "none");
  for (const v of state.violations.list.slice(0, 100)) {
    const item = html("li", {}, list);
    const first = v.path[0];
    html("button", { type: "button", class: "urn-link bad", "data-goto": first || "", title: v.path.join(" → ") },
      item, `${v.policy}: ${v.message}`);
  }
}

// ------------------------------------------------------------------ search

let searchTimer = null;
let searchSeq = 0;
async function search(text) {
  const seq = ++searchSeq;
  const results = $('[data-testid="search-results"]');
  if (!text.trim()) {
    results.replaceChildren();
    return;
  }
  let found;
  try {
    found = await fetchJSON("search", { q: text.trim(), node_type: "asset", limit: 30 });
  } catch (error) {
    if (seq === searchSeq) showError(error);
    return;
  }
  if (seq !== searchSeq) return;
  results.replaceChildren();
  if (!found.length) html("li", { class: "muted" }, results, "no asset matches");
  for (const node of found) {
    mergeNode(node);
    const item = html("li", { "data-testid": "search-result", "data-urn": node.id }, results);
    const button = html("button", { type: "button", title: node.id }, item);
    html("span", { class: "result-name" }, button, shortName(node.id));
    html("span", { class: "result-type" }, button, node.type || kindOf(node.id));
  }
}

// ------------------------------------------------------------------ wiring

function buildChecks(container, values, label = (value) => value.toLowerCase().replace(/_/g, " ")) {
  const box = $(container);
  for (const value of values) {
    const row = html("label", { class: "check" }, box);
    html("input", { type: "checkbox", value, checked: "checked", "data-testid": `filter-${value}` }, row);
    row.append(label(value));
  }
}

async function loadKinds() {
  try {
    const { asset_kinds: kinds } = await fetchJSON("kinds", {}, { ask: false });
    if (!$("#kinds input")) buildChecks("#kinds", kinds, (kind) => kind);
  } catch {
    // not allowed yet: loaded again once a token is given
  }
}

function buildLegend() {
  const legend = $("#legend-signals");
  for (const signal of SIGNALS) {
    const row = html("div", {}, legend);
    const line = svg("svg", { width: 34, height: 10, class: "dash" }, row);
    svg("line", { x1: 1, y1: 5, x2: 33, y2: 5, "stroke-dasharray": SIGNAL_DASH[signal] || null }, line);
    row.append(signal);
  }
}

// every render replaces the SVG's children, so the browser's dblclick (same target twice)
// never fires on a box: two clicks on one box header within DOUBLE_CLICK_MS focus it instead
const DOUBLE_CLICK_MS = 450;
let lastClick = { urn: null, time: 0 };

function onGraphClick(event) {
  const target = event.target.closest("[data-action]");
  if (!target) return;
  const nodeElement = target.closest('[data-testid="node"]');
  const urn = nodeElement ? nodeElement.dataset.urn : null;
  const now = performance.now();
  const twice = target.dataset.action === "select-node" && lastClick.urn === urn
    && now - lastClick.time < DOUBLE_CLICK_MS;
  lastClick = { urn: twice ? null : urn, time: now };
  if (twice) {
    focus(urn);
    return;
  }
  switch (target.dataset.action) {
    case "toggle-group": {
      const id = target.dataset.group;
      if (state.openGroups.has(id)) state.openGroups.delete(id);
      else state.openGroups.add(id);
      render();
      break;
    }
    case "open-member": // back to tables, centred on that member
      $("#group-by").value = "";
      state.grouped = null;
      focus(target.dataset.urn);
      break;
    case "toggle-up": toggleSide(urn, "up"); break;
    case "toggle-down": toggleSide(urn, "down"); break;
    case "select-node": select(urn); break;
    case "toggle-columns": setColumns(urn, !state.openColumns.has(urn)); break;
    case "select-field": select(target.dataset.urn); break;
    case "all-fields": state.allFields.add(urn); render(); break;
    case "page-next":
    case "page-prev": {
      const level = Number(target.dataset.level);
      const offset = state.pages.get(level) || 0;
      state.pages.set(level, Math.max(0, offset + (target.dataset.action === "page-next" ? PAGE : -PAGE)));
      render();
      break;
    }
    default: break;
  }
}

function setZoom(zoom, anchor = null) {
  const canvas = $("#canvas");
  const next = Math.min(2, Math.max(0.1, zoom));
  const point = anchor || { x: canvas.clientWidth / 2, y: canvas.clientHeight / 2 };
  const graph = $("#graph");
  const contentX = (canvas.scrollLeft + point.x - graph.offsetLeft) / state.zoom;
  const contentY = (canvas.scrollTop + point.y - graph.offsetTop) / state.zoom;
  state.zoom = next;
  if (state.layout) {
    graph.setAttribute("width", String(Math.round(state.layout.width * next)));
    graph.setAttribute("height", String(Math.round(state.layout.height * next)));
  }
  canvas.scrollLeft = graph.offsetLeft + contentX * next - point.x;
  canvas.scrollTop = graph.offsetTop + contentY * next - point.y;
}

function fit() {
  if (!state.layout) return;
  const canvas = $("#canvas");
  setZoom(Math.min(canvas.clientWidth / state.layout.width, canvas.clientHeight / state.layout.height, 1.5));
  canvas.scrollLeft = 0;
  canvas.scrollTop = 0;
}

function wirePanning() {
  const canvas = $("#canvas");
  let drag = null;
  canvas.addEventListener("pointerdown", (event) => {
    if (event.button !== 0 || event.target.closest("[data-action]")) return;
    drag = { x: event.clientX, y: event.clientY, left: canvas.scrollLeft, top: canvas.scrollTop, id: event.pointerId };
  });
  canvas.addEventListener("pointermove", (event) => {
    if (!drag || event.pointerId !== drag.id) return;
    if (!canvas.classList.contains("dragging")) {
      if (Math.abs(event.clientX - drag.x) + Math.abs(event.clientY - drag.y) < 4) return;
      canvas.classList.add("dragging");
      canvas.setPointerCapture(drag.id);
    }
    canvas.scrollLeft = drag.left - (event.clientX - drag.x);
    canvas.scrollTop = drag.top - (event.clientY - drag.y);
  });
  const stop = () => {
    drag = null;
    canvas.classList.remove("dragging");
  };
  canvas.addEventListener("pointerup", stop);
  canvas.addEventListener("pointercancel", stop);
  canvas.addEventListener("wheel", (event) => {
    if (!event.ctrlKey && !event.metaKey) return; // plain wheel scrolls
    event.preventDefault();
    const rect = canvas.getBoundingClientRect();
    setZoom(state.zoom * (event.deltaY < 0 ? 1.15 : 1 / 1.15),
      { x: event.clientX - rect.left, y: event.clientY - rect.top });
  }, { passive: false });
}

function nodeFromHash() {
  const match = /^#node=(.+)$/.exec(window.location.hash);
  return match ? decodeURIComponent(match[1]) : null;
}

function init() {
  buildChecks("#signals", SIGNALS);
  buildChecks("#transformations", TRANSFORMATIONS);
  buildLegend();

  const input = $("#search");
  input.addEventListener("input", () => {
    clearTimeout(searchTimer);
    searchTimer = setTimeout(() => search(input.value), 200);
  });
  input.addEventListener("keydown", (event) => {
    if (event.key !== "Enter") return;
    clearTimeout(searchTimer);
    search(input.value);
  });
  $('[data-testid="search-results"]').addEventListener("click", (event) => {
    const item = event.target.closest('[data-testid="search-result"]');
    if (item) focus(item.dataset.urn);
  });

  loadKinds();
  for (const selector of ["#min-confidence", "#as-of", "#direct-only", "#signals", "#transformations", "#kinds"]) {
    $(selector).addEventListener("change", onFiltersChanged);
  }
  $("#group-by").addEventListener("change", () => {
    state.openGroups = new Set();
    loadGrouped();
  });
  $("#as-of-clear").addEventListener("click", () => {
    $("#as-of").value = "";
    onFiltersChanged();
  });
  for (const button of document.querySelectorAll("[data-all], [data-none]")) {
    button.addEventListener("click", () => {
      const group = button.dataset.all || button.dataset.none;
      for (const box of document.querySelectorAll(`#${group} input`)) box.checked = Boolean(button.dataset.all);
      onFiltersChanged();
    });
  }

  const graph = $("#graph");
  graph.addEventListener("click", onGraphClick);
  wirePanning();
  $("#zoom-in").addEventListener("click", () => setZoom(state.zoom * 1.25));
  $("#zoom-out").addEventListener("click", () => setZoom(state.zoom / 1.25));
  $("#zoom-fit").addEventListener("click", fit);

  const panels = (event) => {
    const target = event.target.closest("[data-goto], [data-focus], [data-columns], [data-more-details], [data-why]");
    if (!target) return;
    if (target.dataset.why) loadWhy(target.dataset.why);
    else if (target.dataset.goto) goto(target.dataset.goto);
    else if (target.dataset.focus) focus(target.dataset.focus);
    else if (target.dataset.columns) {
      setColumns(target.dataset.columns, !state.openColumns.has(target.dataset.columns)).then(renderDetails);
    } else if (target.dataset.moreDetails) {
      state.detailLimit += 200;
      renderDetails();
    }
  };
  $('[data-testid="details"]').addEventListener("click", panels);
  $('[data-testid="violations"]').addEventListener("click", panels);
  window.addEventListener("hashchange", () => {
    const urn = nodeFromHash();
    if (urn && urn !== state.root) focus(urn);
  });

  loadViolations();
  const start = nodeFromHash();
  if (start) focus(start);
  document.body.dataset.ready = "true";
}

init();
