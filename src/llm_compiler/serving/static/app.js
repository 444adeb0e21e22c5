// The live plan page: subscribes to a run's events and draws its DAG, timeline and text.
// Layout rule: task ids only point backwards, so a task's column is one more than the
// furthest column of its inputs (at least its round's first column) and its row is the
// next free row of that column. Positions are set once, on arrival: nothing ever moves.
"use strict";

const $ = (id) => document.getElementById(id);
const SVGNS = "http://www.w3.org/2000/svg";
const COL_W = 200, ROW_H = 60, NODE_W = 170, NODE_H = 44, PAD = 16, TOP = 26;
const GANTT_W = 760, BAR_H = 18, LABEL_W = 150;

// Exposed for tests and benchmarks: the current run and its measurements.
const page = (window.compilerPage = { run: null, latencies: [] });

// The server's token, if it has one: handed over once in the URL fragment (#token=..., never
// sent to the server), kept for this tab in sessionStorage and sent as a header with every
// request to this server, the event stream included (so it is read with fetch: EventSource
// sends no headers). fetch itself is wrapped, so no request of the page can go without it.
const TOKEN_KEY = "llm-compiler-token";
const handed = /(?:^#|&)token=([^&]*)/.exec(location.hash);
if (handed) {
  sessionStorage.setItem(TOKEN_KEY, decodeURIComponent(handed[1]));
  history.replaceState(history.state, "", location.pathname + location.search);
}
const pageFetch = window.fetch.bind(window);
window.fetch = async (path, options = {}) => {
  if (typeof path !== "string" || !path.startsWith("/")) return pageFetch(path, options);
  const token = sessionStorage.getItem(TOKEN_KEY);
  const headers = new Headers(options.headers || {});
  if (token) headers.set("authorization", `Bearer ${token}`);
  const r = await pageFetch(path, { ...options, headers });
  if (r.status === 401) {
    $("error").textContent = "This server needs its token: open the page as the URL llm-compiler serve printed, followed by #token=<the token>.";
    $("error").hidden = false;
  }
  return r;
};

function el(tag, attrs = {}, parent = null, text = null) {
  const node = document.createElementNS(SVGNS, tag);
  for (const [k, v] of Object.entries(attrs)) node.setAttribute(k, v);
  if (text !== null) node.textContent = text;
  if (parent) parent.appendChild(node);
  return node;
}

function html(tag, attrs = {}, text = null) {
  const node = document.createElement(tag);
  for (const [k, v] of Object.entries(attrs)) node.setAttribute(k, v);
  if (text !== null) node.textContent = text;
  return node;
}

const short = (s, n) => (s.length > n ? s.slice(0, n - 1) + "…" : s);
const plural = (n, one, many = one + "s") => `${n} ${n === 1 ? one : many}`;
const now = () => Date.now() / 1000;

// A plan argument as the planner wrote it: {"$ref": 2} is $2, {"$concat": [...]} a template.
function showArg(v) {
  if (v && typeof v === "object" && !Array.isArray(v)) {
    if (Number.isInteger(v.$ref) && Object.keys(v).length === 1) return "$" + v.$ref;
    if (Array.isArray(v.$concat)) return JSON.stringify(v.$concat.map((p) => (typeof p === "string" ? p : showArg(p))).join(""));
  }
  return JSON.stringify(v);
}

function argsText(task) {
  const parts = (task.args || []).map(showArg);
  for (const [k, v] of Object.entries(task.kwargs || {})) parts.push(`${k}=${showArg(v)}`);
  return parts.join(", ");
}

function policyText(p) {
  const parts = [p.side_effect.replace(/_/g, " ")];
  if (p.requires_approval) parts.push("needs approval");
  if (p.max_concurrency) parts.push(`at most ${p.max_concurrency} at once`);
  for (const [k, v] of Object.entries(p.limits || {})) parts.push(`${k} ≤ ${v}`);
  if (p.resource_keys && p.resource_keys.length) parts.push(`keys ${p.resource_keys.join(", ")}`);
  if (p.retry && p.retry.attempts > 1) parts.push(`retried up to ${p.retry.attempts} tries`);
  if (p.timeout) parts.push(`timeout ${p.timeout} s`);
  return parts.join(" · ");
}

// Every argument whole, one a line (the node shows them cut to fit).
function argLines(task) {
  const lines = (task.args || []).map(showArg);
  for (const [k, v] of Object.entries(task.kwargs || {})) lines.push(`${k}=${showArg(v)}`);
  return lines.join("\n");
}

function answerOf(result) {
  const response = result && result.response;
  if (!response) return result == null ? "" : String(typeof result === "object" ? JSON.stringify(result) : result);
  if (typeof response.content === "string") return response.content;
  return (response.blocks || []).map((b) => b.text || "").join("");
}

class Run {
  constructor(id) {
    this.id = id;
    this.tasks = new Map();
    this.rounds = new Map();
    this.nextCol = 0;
    this.maxRow = 0;
    this.running = 0;
    this.peak = 0;
    this.skew = 0; // server clock minus this page's clock, from task results
    this.finished = false;
    this.source = null;
    this.dag = $("dag");
    this.dag.replaceChildren();
    this.edges = el("g", { class: "edges" }, this.dag);
    this.nodes = el("g", { class: "nodes" }, this.dag);
    $("rounds").replaceChildren();
    $("gantt").replaceChildren();
    for (const id of ["answer", "error", "details", "costs"]) $(id).hidden = true;
    $("mermaid").href = `/api/runs/${encodeURIComponent(id)}/mermaid`;
    $("mermaid").hidden = false;
    $("peak").textContent = "";
    this.resize();
  }

  round(r) {
    let round = this.rounds.get(r);
    if (!round) {
      round = { r, startCol: this.nextCol, maxCol: this.nextCol - 1, rows: new Map(), join: null, text: {} };
      this.rounds.set(r, round);
      const x = PAD + round.startCol * COL_W;
      el("text", { x, y: 16, class: "round-label" }, this.nodes, `Round ${r}`);
      round.panel = html("div", { class: "round" });
      round.panel.append(html("h3", {}, `Round ${r}`));
      $("rounds").append(round.panel);
    }
    return round;
  }

  stream(r, phase, delta) {
    const round = this.round(r);
    if (!round.text[phase]) {
      const box = html("details", phase === "join" ? { open: "" } : {});
      box.append(html("summary", {}, phase === "join" ? "Joiner" : "Planner"), html("pre", { class: phase }));
      round.panel.append(box);
      round.text[phase] = box.querySelector("pre");
    }
    round.text[phase].textContent += delta;
    if (phase === "plan") this.endReading(r);
  }

  place(round, col) {
    const row = round.rows.get(col) || 0;
    round.rows.set(col, row + 1);
    round.maxCol = Math.max(round.maxCol, col);
    this.maxRow = Math.max(this.maxRow, row + 1);
    return { x: PAD + col * COL_W, y: TOP + row * ROW_H };
  }

  addTask(t) {
    if (this.tasks.has(t.id)) return;
    const round = this.round(t.round);
    const deps = (t.deps || []).filter((d) => this.tasks.has(d));
    const col = Math.max(round.startCol, ...deps.map((d) => this.tasks.get(d).col + 1));
    const pos = this.place(round, col);
    const task = { ...t, deps, col, ...pos, state: t.error ? "error" : "planned", dependents: 0, lines: [] };
    if (t.error) task.output = t.error;
    this.tasks.set(t.id, task);
    for (const d of deps) {
      this.tasks.get(d).dependents += 1;
      this.edge(this.tasks.get(d), task);
    }
    task.g = el("g", { class: `node ${task.state}`, "data-task": t.id, transform: `translate(${pos.x},${pos.y})`, tabindex: 0 }, this.nodes);
    el("title", {}, task.g, `${t.id}. ${t.tool}(${argsText(t)})\n(click for its arguments, output and timing)`);
    el("rect", { width: NODE_W, height: NODE_H, rx: 8 }, task.g);
    el("text", { x: 10, y: 18, class: "title" }, task.g, `${t.id} · ${short(t.tool, 18)}`);
    el("text", { x: 10, y: 35, class: "args" }, task.g, short(argsText(t), 21));
    task.note = el("text", { x: NODE_W - 6, y: 13, class: "note", "text-anchor": "end" }, task.g, "");
    task.g.addEventListener("click", () => this.show(task.id));
    task.g.addEventListener("keydown", (e) => e.key === "Enter" && this.show(task.id));
    this.resize();
  }

  addJoin(r, joinId) {
    const round = this.round(r);
    if (round.join) return;
    const col = round.maxCol + 1;
    const pos = this.place(round, col);
    const g = el("g", { class: "node join", transform: `translate(${pos.x},${pos.y})` }, this.nodes);
    round.join = { id: joinId, ...pos, g, lines: [] };
    el("rect", { width: NODE_W * 0.6, height: NODE_H, rx: NODE_H / 2 }, g);
    el("text", { x: 14, y: 27, class: "title" }, g, `${joinId} · join`);
    for (const t of this.tasks.values()) {
      if (t.round === r && t.dependents === 0) this.edge(t, round.join);
    }
    this.nextCol = col + 1;
    this.resize();
  }

  edge(a, b) {
    const x1 = a.x + NODE_W, y1 = a.y + NODE_H / 2, x2 = b.x, y2 = b.y + NODE_H / 2;
    const mid = (x1 + x2) / 2;
    const path = el("path", { d: `M${x1},${y1} C${mid},${y1} ${mid},${y2} ${x2},${y2}`, class: "edge" }, this.edges);
    a.lines.push(path);
    b.lines.push(path);
  }

  // A plan that replaces the one shown for round r (a human edited it before approving):
  // its tasks, edges and join go, and the round is laid out again from its first column.
  dropRound(r) {
    const round = this.rounds.get(r);
    if (!round) return;
    for (const [id, t] of [...this.tasks]) {
      if (t.round !== r) continue;
      t.g.remove();
      for (const line of t.lines) line.remove();
      this.tasks.delete(id);
    }
    if (round.join) round.join.g.remove();
    round.join = null;
    round.rows = new Map();
    round.maxCol = round.startCol - 1;
    this.nextCol = round.startCol;
  }

  resize() {
    const cols = Math.max(this.nextCol, ...[...this.rounds.values()].map((r) => r.maxCol + 1), 1);
    this.dag.setAttribute("width", PAD * 2 + cols * COL_W);
    this.dag.setAttribute("height", TOP + Math.max(1, this.maxRow) * ROW_H + PAD);
  }

  setState(task, state) {
    if (task.state === "running") this.running -= 1;
    if (state === "running") this.running += 1;
    task.g.classList.replace(task.state, state);
    task.state = state;
    if (this.selected === task.id && !$("details").hidden) this.show(task.id); // it follows the task
    this.peak = Math.max(this.peak, this.running);
    $("dag").dataset.peakRunning = this.peak;
    if (this.running > 0 && !this.ticking) this.tick(0);
  }

  // While tasks run, their timeline bars grow (redrawn every 100 ms, only while visible).
  tick(last) {
    this.ticking = this.running > 0 && !this.finished && page.run === this;
    if (!this.ticking) return;
    requestAnimationFrame((t) => {
      if (t - last >= 100) this.gantt();
      this.tick(t - last >= 100 ? t : last);
    });
  }

  ready(v) {
    const task = this.tasks.get(v.task_id);
    if (!task) return;
    task.resolved = v.args;
    task.readyAt = now();
    Object.assign(task, { policy: v.policy, keys: v.resource_keys, waited: v.waited, approval: null });
    this.note(task, v.waited >= 0.01 ? `waited ${v.waited.toFixed(2)} s` : "");
    this.setState(task, "running");
  }

  // Tool policies on the page: a task held for approval, a wait for a slot, a retry.
  note(task, text) {
    task.note.textContent = text;
    if (this.selected === task.id) this.show(task.id);
  }

  held(v) {
    const task = this.tasks.get(v.task_id);
    if (!task) return;
    if (!task.heldAt) task.heldAt = this.readySince(task);
    Object.assign(task, { approval: v, resolved: v.args, policy: v.policy });
    this.note(task, "⏸ approval");
    this.setState(task, "held");
  }

  // What the status line says while tasks are held: they, not the plan, are the news.
  heldStatus() {
    const held = [...this.tasks.values()].filter((t) => t.state === "held");
    if (!held.length || this.finished) return null;
    const which = held.length === 1 ? `Task ${held[0].id} (${held[0].tool}) waits` : `Tasks ${held.map((t) => t.id).join(", ")} wait`;
    const busy = [...this.tasks.values()].some((t) => t.state === "running" || t.state === "waiting");
    const rest = busy ? "the rest runs on" : "nothing else can run until you answer";
    return `${which} for your approval (click it); ${rest}.`;
  }

  waiting(v) {
    const task = this.tasks.get(v.task_id);
    if (!task) return;
    task.slot = v.slot;
    if (!task.waitingAt) task.waitingAt = this.readySince(task);
    this.note(task, `waits ${short(v.slot === "*" ? "slot" : v.slot, 18)}`);
    this.setState(task, "waiting");
  }

  attempt(v) {
    const task = this.tasks.get(v.task_id);
    if (!task) return;
    task.attempt = v;
    if (v.attempt > 1 && v.started_at) (task.tries = task.tries || []).push({ at: v.started_at, n: v.attempt, of: v.attempts, error: v.error });
    if (v.attempts > 1) this.note(task, `try ${v.attempt} of ${v.attempts}`);
  }

  // When a task became ready (server clock): its inputs' last finish, else when this page saw it.
  readySince(task) {
    const ends = task.deps.map((d) => this.tasks.get(d)).filter((d) => d && d.finished).map((d) => d.finished);
    return ends.length ? Math.max(...ends) : now() + this.skew;
  }

  // A verdict on a held task, sent as POST /events like a plan approval.
  async verdict(task, action) {
    const a = task.approval;
    const value = { run_id: a.run_id, round: a.round, task_id: a.task_id, action, reason: $("d-reason") ? $("d-reason").value : "" };
    if (action === "edit") {
      try {
        value.args = JSON.parse($("d-args").value);
      } catch (e) {
        $("d-verdict-error").textContent = `Arguments must be a JSON object: ${e.message}`;
        return;
      }
    }
    const r = await fetch(`/events/${encodeURIComponent(this.id)}`, {
      method: "POST",
      headers: { "content-type": "application/json" },
      body: JSON.stringify({ event: { type: "TaskApprovalResponse", value } }),
    });
    if (!r.ok) {
      const body = await r.json().catch(() => ({}));
      $("d-verdict-error").textContent = body.detail || `HTTP ${r.status}`;
      return;
    }
    task.approval = null;
    this.note(task, action === "reject" ? "rejected" : "approved");
    this.setState(task, "planned");
    this.show(task.id);
    status(this.heldStatus() || `Task ${task.id} ${action === "reject" ? "rejected" : "approved"}; the run goes on.`);
  }

  verdictForm(task, body) {
    const form = html("div", { class: "verdict" });
    const args = html("textarea", { id: "d-args", rows: 4 });
    args.value = JSON.stringify(task.approval.args, null, 2);
    const reason = html("input", { id: "d-reason", placeholder: "reason (optional)" });
    form.append(html("dt", {}, "Approve this call?"), args, reason);
    for (const action of ["approve", "edit", "reject"]) {
      const b = html("button", { type: "button", "data-verdict": action }, action[0].toUpperCase() + action.slice(1));
      b.addEventListener("click", () => this.verdict(task, action));
      form.append(b);
    }
    form.append(html("p", { id: "d-verdict-error", class: "reason" }, ""));
    body.append(form);
  }

  result(v) {
    const task = this.tasks.get(v.task_id);
    if (!task) return;
    Object.assign(task, { output: v.output, started: v.started_at, finished: v.finished_at, attempts: v.attempts, cached: v.cached ? v.saved || 0 : null, approval: null });
    if (v.attempts > 1) this.note(task, `${v.attempts} tries`);
    if (v.cached) this.note(task, `cached, saved ${(v.saved || 0).toFixed(2)} s`);
    if (v.finished_at) this.skew = v.finished_at - now();
    this.setState(task, v.skipped ? "skipped" : v.is_error ? "error" : "done");
    this.critical();
    page.latencies.push(now() - v.finished_at); // event -> DOM delay, for the benchmark
    if (page.latencies.length > 1000) page.latencies.shift();
  }

  // The chain of tasks that ends last: from the last finisher, back through its latest input.
  critical() {
    const finished = [...this.tasks.values()].filter((t) => t.finished);
    for (const t of finished) t.critical = false;
    let t = finished.sort((a, b) => b.finished - a.finished)[0];
    while (t) {
      t.critical = true;
      const deps = t.deps.map((d) => this.tasks.get(d)).filter((d) => d && d.finished);
      t = deps.sort((a, b) => b.finished - a.finished)[0];
    }
    for (const task of this.tasks.values()) task.g.classList.toggle("critical", !!task.critical);
  }

  // One row per task: a held span (waiting for approval), a wait for a slot, then the call,
  // with a mark where each retry started.
  gantt() {
    const rows = [...this.tasks.values()].filter((t) => t.started || t.readyAt || t.heldAt || t.waitingAt);
    const live = () => (this.finished ? null : now() + this.skew);
    const start = (t) => t.started || (t.readyAt ? t.readyAt + this.skew : null);
    const queued = (t) => (start(t) != null ? start(t) - (t.waited || 0) : null);
    const first = (t) => Math.min(...[t.heldAt, t.waitingAt, queued(t)].filter((x) => x != null));
    const end = (t) => t.finished || (start(t) != null ? live() ?? start(t) : live() ?? first(t));
    const svg = $("gantt");
    svg.replaceChildren();
    if (!rows.length) return svg.setAttribute("height", 0);
    rows.sort((a, b) => first(a) - first(b));
    const t0 = Math.min(...rows.map(first));
    const span = Math.max(0.001, Math.max(...rows.map(end)) - t0);
    const scale = (GANTT_W - LABEL_W - PAD) / span;
    const x = (t) => LABEL_W + (t - t0) * scale;
    svg.setAttribute("width", GANTT_W);
    svg.setAttribute("height", rows.length * (BAR_H + 6) + 24);
    rows.forEach((t, i) => {
      const y = i * (BAR_H + 6);
      el("text", { x: 0, y: y + 13, class: "gantt-label" }, svg, short(`${t.id} · ${t.tool}`, 20));
      const s = start(t);
      if (t.heldAt) {
        const to = s != null ? queued(t) : end(t);
        this.span(svg, t, "held-span", t.heldAt, Math.max(t.heldAt, to), y, x, `held for approval ${(to - t.heldAt).toFixed(2)} s`);
      }
      const waitFrom = s != null ? queued(t) : t.waitingAt;
      const waitTo = s != null ? s : t.waitingAt != null && !t.heldAt ? end(t) : null;
      if (waitFrom != null && waitTo != null && waitTo - waitFrom >= 0.005) {
        const slot = t.slot ? ` (${t.slot === "*" ? "the run's cap" : t.slot})` : "";
        this.span(svg, t, "wait-span", waitFrom, waitTo, y, x, `waited ${(waitTo - waitFrom).toFixed(2)} s for a slot${slot}`);
      }
      if (s == null) return;
      const bar = this.span(svg, t, `bar ${t.state}${t.critical ? " critical" : ""}`, s, end(t), y, x, `${t.id}. ${t.tool}: ${(end(t) - s).toFixed(3)} s`);
      bar.setAttribute("rx", 3);
      for (const r of t.tries || []) {
        const mark = el("line", { x1: x(r.at), x2: x(r.at), y1: y - 2, y2: y + BAR_H + 2, class: "try-mark", "data-task": t.id, "data-try": r.n }, svg);
        el("title", {}, mark, `try ${r.n} of ${r.of} at +${(r.at - s).toFixed(2)} s${r.error ? ` (after: ${short(r.error, 60)})` : ""}`);
      }
    });
    const y = rows.length * (BAR_H + 6) + 14;
    el("text", { x: LABEL_W, y, class: "gantt-label" }, svg, "0 s");
    el("text", { x: GANTT_W - PAD, y, class: "gantt-label", "text-anchor": "end" }, svg, `${span.toFixed(2)} s`);
    $("peak").textContent = `· up to ${plural(this.peak, "task")} at once · critical path outlined · hatched: waits`;
  }

  span(svg, t, cls, from, to, y, x, title) {
    const rect = el("rect", { x: x(from), y, width: Math.max(2, x(to) - x(from)), height: BAR_H, class: cls, "data-task": t.id }, svg);
    el("title", {}, rect, title);
    return rect;
  }

  // One LLM call's tokens and cost, under its round (the planner's live, the joiner's at the end).
  callUsage(c) {
    const round = this.round(c.round);
    const key = `usage-${c.phase}`;
    if (round[key]) return;
    const cached = c.cached_tokens ? ` (${fmt(c.cached_tokens)} cached)` : "";
    const text = `${c.phase === "joiner" ? "Joiner" : "Planner"}: ${fmt(c.prompt_tokens)} in${cached} · ${fmt(c.completion_tokens)} out` +
      `${c.source === "counted" ? " (counted)" : ""}${c.cost == null ? "" : ` · ${money(c.cost)}`} · ${(c.finished_at - c.started_at).toFixed(2)} s`;
    round[key] = html("p", { class: "usage", "data-phase": c.phase }, text);
    round.panel.append(round[key]);
  }

  // The run's totals: tokens, cost, time in LLM calls vs tools, and the critical path.
  costs(summary) {
    for (const c of summary.llm_calls || []) this.callUsage(c);
    const u = summary.usage || {};
    const path = [...this.tasks.values()].filter((t) => t.critical).sort((a, b) => a.started - b.started);
    const pathText = path.length
      ? `${path.map((t) => t.id).join(" → ")} (${(path[path.length - 1].finished - path[0].started).toFixed(2)} s): ` +
        "the chain of tasks that set how long the tools took " +
        (path.length > 1 ? "(each needed the result of the one before it; the chain ended last)" : "(one task, which ended last)")
      : "none";
    const items = [
      ["Tokens", `${fmt(u.prompt_tokens)} in${u.cached_tokens ? ` (${fmt(u.cached_tokens)} cached)` : ""} · ${fmt(u.completion_tokens)} out · ${plural(u.calls || 0, "LLM call")}`],
      ["Cost", money(u.cost)],
      ["Time", `LLM ${(summary.llm_seconds || 0).toFixed(2)} s · tools ${(summary.tool_seconds || 0).toFixed(2)} s`],
      ["Critical path", pathText],
    ];
    const box = $("costs");
    box.replaceChildren();
    for (const [k, v] of items) box.append(html("span", { class: "stat", "data-stat": k.toLowerCase().replace(" ", "-") }, `${k}: ${v}`));
    box.querySelector('[data-stat="critical-path"]').title = "The critical path is the chain of tasks, each needing the result of the one before, that ended with the last task to finish: it sets how long the tools took, whatever ran in parallel.";
    box.hidden = false;
  }

  show(id) {
    const t = this.tasks.get(id);
    if (!t) return;
    const rows = [
      ["Line", t.text], ["Thought", t.thought], ["State", t.state], ["Inputs", t.deps.map((d) => "$" + d).join(", ")],
      ["Arguments as planned", argLines(t)],
      ["Arguments passed", t.resolved === undefined ? null : JSON.stringify(t.resolved, null, 2)],
      [t.state === "error" ? "Error" : "Output", t.output === undefined ? null : typeof t.output === "string" ? t.output : JSON.stringify(t.output, null, 2)],
      ["Started", t.started ? new Date(t.started * 1000).toISOString().slice(11, 23) : null],
      ["Duration", t.finished && t.started ? `${(t.finished - t.started).toFixed(3)} s` : null],
      ["Policy", t.policy ? policyText(t.policy) : null],
      ["Resource keys", t.keys && t.keys.length ? t.keys.join(", ") : null],
      ["Waits for", t.state === "waiting" ? t.slot : null],
      ["Waited for a slot", t.waited ? `${t.waited.toFixed(3)} s` : null],
      ["Result cache", t.cached === null || t.cached === undefined ? null : `served from the cache (the tool was not called), saved ${t.cached.toFixed(3)} s`],
      ["Attempts", t.attempt && t.attempt.attempts > 1 ? `${t.attempts || t.attempt.attempt} of ${t.attempt.attempts}${t.attempt.error ? ` (last error: ${t.attempt.error})` : ""}` : null],
    ];
    const body = $("d-body");
    body.replaceChildren();
    for (const [k, v] of rows) {
      if (v === null || v === undefined || v === "") continue;
      body.append(html("dt", {}, k), html("dd", {}, String(v)));
    }
    if (t.approval) this.verdictForm(t, body);
    this.selected = id;
    for (const g of this.nodes.querySelectorAll(".selected")) g.classList.remove("selected");
    t.g.classList.add("selected");
    $("d-title").textContent = `${t.id} · ${t.tool}`;
    $("details").hidden = false;
    $("details").dataset.task = id;
  }

  handle(type, v) {
    if (type === "PlanEvent") {
      if (v.replaces) this.dropRound(v.round);
      this.round(v.round);
      for (const t of v.tasks) if (t.tool !== "join") this.addTask(t);
      if (v.complete && v.join_id != null) this.addJoin(v.round, v.join_id);
      if (v.complete && v.errors.length) this.stream(v.round, "plan", "\n[plan errors] " + v.errors.join("; "));
      if (v.complete && v.cached) this.stream(v.round, "plan", "[from the plan cache: no planner call]\n" + v.text);
      if (v.complete && !v.tasks.some((t) => t.tool !== "join")) {
        const why = v.errors.length ? v.errors.join(" ") : "The planner wrote only join().";
        this.round(v.round).panel.append(html("p", { class: "reason no-tasks" }, `No tasks planned: ${why}`));
      }
      if (v.complete && v.llm_call) this.callUsage(v.llm_call);
      if (v.complete) this.round(v.round).planned = true;
      if (v.complete && !this.relisted) this.relist();
      status(`Round ${v.round}: ${v.complete ? "plan complete" : "planning…"}`);
      this.endReading(v.round);
    } else if (type === "TaskReady") this.ready(v);
    else if (type === "TaskResult") this.result(v);
    else if (type === "TaskApprovalRequest") this.held(v);
    else if (type === "TaskWaiting") this.waiting(v);
    else if (type === "TaskStarted") this.attempt(v);
    else if (type === "CompilerStream" || type === "AgentStream") {
      this.stream(v.round || 0, v.phase || "plan", v.delta || "");
      if ((v.phase || "plan") === "plan" && !this.rounds.get(v.round || 0).planned) status(`Round ${v.round || 0}: planning…`);
    }
    else if (type === "JoinEvent") status(`Round ${v.round}: the joiner reads the results…`);
    else if (type === "ReplanEvent") {
      const prev = this.rounds.get(v.round - 1);
      if (prev && !prev.join) this.nextCol = prev.maxCol + 1;
      this.round(v.round).panel.append(html("p", { class: "reason" }, `Replan: ${v.reason}`));
      this.reading(v.round, `Replanning (round ${v.round})`);
    } else if (type === "RunResumed") this.resumed(v);
    else if (type === "StopEvent") this.finish(answerOf(v.result), v.result && v.result.summary);
    else if (type === "WorkflowFailedEvent" || type === "WorkflowCancelledEvent" || type === "WorkflowTimedOutEvent") this.fail(type, v);
    if (type === "TaskReady" || type === "TaskResult" || type === "StopEvent") this.gantt();
    const held = this.heldStatus();
    if (held) status(held);
  }

  // Before a round's first token the model reads its prompt (instructions, tools, examples,
  // the question and earlier results): a cold model takes seconds. Say so, with the time it
  // has taken, until the first token arrives (stream() ends it).
  reading(r, label) {
    const round = this.round(r);
    if (round.planned || round.text.plan) return;
    const since = Date.now();
    const say = () => {
      if (!round.hint || this.finished || page.run !== this) return false;
      const s = Math.round((Date.now() - since) / 1000);
      status(`${label}: the model reads its prompt (instructions, tools, examples, the question) before it writes the plan${s >= 2 ? ` · ${s} s` : ""}${s >= 5 ? " (a model's first question takes longest)" : ""}…`);
      return true;
    };
    round.hint = html("p", { class: "muted reading" }, "The planner has not written yet: the model is reading its prompt.");
    round.panel.append(round.hint);
    say();
    const timer = setInterval(() => say() || clearInterval(timer), 1000); // a clock on the page
  }

  endReading(r) {
    const round = this.rounds.get(r);
    if (round && round.hint) round.hint = void round.hint.remove();
  }

  // Once a plan is made the run's question is saved: list it (and show it) by its question.
  relist() {
    this.relisted = true;
    loadRuns();
    if (!$("question").value) runQuestion(this.id);
  }

  // A worker took the run up again after a crash or restart: what follows came after it.
  // Streamed text cut by the crash starts again, so each open text box gets the mark too.
  resumed(v) {
    const last = Math.max(0, ...this.rounds.keys());
    const round = this.round(last);
    const text = `⟳ resumed on worker ${v.worker}`;
    round.panel.append(html("p", { class: "resumed" }, text));
    for (const pre of Object.values(round.text)) pre.append(html("span", { class: "resumed" }, `\n${text}\n`));
    this.resumes = (this.resumes || 0) + 1;
    status(text);
  }

  finish(answer, summary) {
    this.finished = true;
    $("answer").textContent = answer;
    $("answer").hidden = false;
    if (summary) this.costs(summary);
    status("Done", "done");
    this.close();
  }

  fail(type, v) {
    this.finished = true;
    const detail = (v && ((v.exception && v.exception.exception_message) || v.error)) || type.replace(/Event$/, "");
    $("error").textContent = detail;
    $("error").hidden = false;
    status(type.includes("Cancel") ? "Cancelled" : "Failed", "failed");
    this.close();
  }

  close() {
    if (this.source) this.source.abort();
    this.source = null;
    $("cancel").hidden = true;
    this.gantt();
    loadRuns();
  }

  subscribe() {
    status("Connecting…");
    $("cancel").hidden = false;
    this.source = new AbortController();
    this.follow(this.source.signal);
  }

  // The run's SSE stream, read with fetch and parsed frame by frame. It starts at
  // after_sequence=-1 (the server's default, "now", would drop earlier events); after a
  // dropped connection it resumes after the last event seen, as EventSource would.
  async follow(signal) {
    let last = "-1";
    for (let tries = 0; tries < 5 && !this.finished && !signal.aborted; tries++) {
      try {
        const r = await fetch(`/events/${encodeURIComponent(this.id)}?after_sequence=${last}`, { signal });
        if (r.status !== 200 || !r.body) break;
        tries = 0;
        if (!this.handled) this.reading(0, "Round 0"); // the planner works before any event
        const reader = r.body.pipeThrough(new TextDecoderStream()).getReader();
        let buffer = "";
        for (let chunk = await reader.read(); !chunk.done; chunk = await reader.read()) {
          buffer += chunk.value;
          let cut;
          while ((cut = buffer.indexOf("\n\n")) >= 0) {
            last = this.frame(buffer.slice(0, cut)) ?? last;
            buffer = buffer.slice(cut + 2);
          }
        }
      } catch (e) {
        if (signal.aborted) return;
      }
      if (!this.finished && !signal.aborted) await new Promise((ok) => setTimeout(ok, 1000));
    }
    if (!this.finished && !signal.aborted) this.settle();
  }

  // One SSE frame ("id: n" and "data: {...}" lines): handle its event, return its id.
  frame(text) {
    let id = null, data = "";
    for (const line of text.split("\n")) {
      if (line.startsWith("id:")) id = line.slice(3).trim();
      else if (line.startsWith("data:")) data += line.slice(5).trimStart();
    }
    if (data) {
      this.handled = true;
      const env = JSON.parse(data);
      this.handle(env.type, env.value || {});
    }
    return id;
  }

  // The stream ended without a final event (e.g. 204: the run was over): ask its status.
  async settle() {
    const r = await fetch(`/handlers/${encodeURIComponent(this.id)}`);
    if (!r.ok) return this.fail("Failed", { error: r.status === 404 ? "Run not found" : `HTTP ${r.status}` });
    const h = await r.json();
    if (h.status === "completed" && h.result) this.finish(answerOf(h.result.value.result), h.result.value.result.summary);
    else if (h.status !== "running") this.fail(h.status === "cancelled" ? "WorkflowCancelledEvent" : "Failed", { error: h.error || h.status });
  }
}

function fmt(n) {
  return (n || 0).toLocaleString("en-US");
}

// A cost in USD; null means the model has no price (unknown, not free).
function money(cost) {
  if (cost === null || cost === undefined) return "unknown (no price for this model)";
  return cost < 0.01 ? `$${cost.toFixed(6)}` : `$${cost.toFixed(4)}`;
}

function status(text, cls = "") {
  $("status").textContent = text;
  $("status").className = cls || "muted";
}

// Questions this tab asked, by handler id: a run's question is shown before the server
// has stored it (it is read from the run's saved state).
const ASKED_KEY = "llm-compiler-asked";
const asked = new Map(JSON.parse(sessionStorage.getItem(ASKED_KEY) || "[]"));
function remember(id, question) {
  asked.set(id, question);
  sessionStorage.setItem(ASKED_KEY, JSON.stringify([...asked].slice(-200)));
}

// The question box shows the question of the run on view (unless the user is typing).
function showQuestion(question) {
  const box = $("question");
  if (question && document.activeElement !== box) box.value = question;
}

function openRun(id, question = null) {
  if (page.run) page.run.close();
  page.run = new Run(id);
  page.run.subscribe();
  showQuestion(question || asked.get(id));
  if (!question) runQuestion(id);
  for (const li of $("runs").children) li.classList.toggle("current", li.dataset.run === id);
}

async function runQuestion(id) {
  const r = await fetch(`/api/runs/${encodeURIComponent(id)}`);
  const run = r.ok ? await r.json() : {};
  if (page.run && page.run.id === id) showQuestion(run.question);
}

async function ask(event) {
  event.preventDefault();
  const question = $("question").value.trim();
  const workflow = $("workflow").value || "compiler";
  const r = await fetch(`/workflows/${encodeURIComponent(workflow)}/run-nowait`, {
    method: "POST",
    headers: { "content-type": "application/json" },
    body: JSON.stringify({ start_event: { user_msg: question } }),
  });
  const body = await r.json().catch(() => ({}));
  if (!r.ok) {
    $("error").textContent = body.detail || `HTTP ${r.status}`;
    $("error").hidden = false;
    return;
  }
  remember(body.handler_id, question);
  history.pushState({ run: body.handler_id }, "", `?run=${encodeURIComponent(body.handler_id)}`);
  openRun(body.handler_id, question);
  loadRuns();
}

// The run list, newest first. Requests may overlap (a run opened and one finishing): only
// the newest answer is drawn, and it replaces the list in one step, so no run shows twice.
let listed = 0;
async function loadRuns() {
  const ticket = ++listed;
  const r = await fetch("/api/runs");
  if (!r.ok) return;
  const runs = (await r.json()).runs;
  if (ticket !== listed) return;
  $("runs").replaceChildren(...runs.map(runItem));
}

function runItem(run) {
  const question = run.question || asked.get(run.handler_id);
  const label = question || `(question not saved yet) ${run.workflow} run`;
  const li = html("li", { class: run.status, "data-run": run.handler_id });
  const a = html("a", { href: `?run=${encodeURIComponent(run.handler_id)}`, title: question || run.handler_id }, short(label, 60));
  a.addEventListener("click", (e) => {
    e.preventDefault();
    history.pushState({ run: run.handler_id }, "", a.getAttribute("href"));
    openRun(run.handler_id, question);
  });
  li.append(a, html("span", { class: "badge" }, run.status));
  if (run.worker) li.append(html("span", { class: "badge worker", title: "the worker holding this run" }, `@${run.worker}`));
  if (page.run && page.run.id === run.handler_id) li.classList.add("current");
  return li;
}

// The Mermaid chart needs the token too: fetched, then shown from a local blob.
async function openChart(event) {
  if (!sessionStorage.getItem(TOKEN_KEY)) return; // no token: the plain link works
  event.preventDefault();
  const r = await fetch($("mermaid").getAttribute("href"));
  if (r.ok) window.open(URL.createObjectURL(new Blob([await r.text()], { type: "text/plain" })), "_blank");
}

async function init() {
  const r = await fetch("/api/info");
  if (!r.ok) return;
  const info = await r.json();
  const question = $("question");
  if (info.question) question.placeholder = `e.g. ${info.question}`;
  // The sample question, unless a run is on view or the user has started typing.
  const viewing = new URLSearchParams(location.search).get("run");
  if (!viewing && !question.value && document.activeElement !== question) question.value = info.question || "";
  $("model").textContent = info.model ? `model: ${info.model}` : "";
  if (info.workflows.length > 1) {
    $("workflow").hidden = false;
    for (const name of info.workflows) $("workflow").append(html("option", { value: name }, name));
  }
  $("workflow").value = info.default;
  $("ask").addEventListener("submit", ask);
  const json = { "content-type": "application/json" };
  $("cancel").addEventListener("click", () => page.run && fetch(`/handlers/${encodeURIComponent(page.run.id)}/cancel`, { method: "POST", headers: json, body: "{}" }));
  $("mermaid").addEventListener("click", openChart);
  $("d-close").addEventListener("click", () => ($("details").hidden = true));
  window.addEventListener("popstate", () => {
    const id = new URLSearchParams(location.search).get("run");
    if (id) openRun(id);
  });
  const id = new URLSearchParams(location.search).get("run");
  if (id) openRun(id);
  loadRuns();
}

init();
