// The memory console's page. Every text is set with textContent, never parsed as HTML.
"use strict";

// `measured`: what this browser measured per turn id (kept across user switches).
const state = { user: "", session: null, turns: [], busy: false, measured: {} };
const $ = (id) => document.getElementById(id);

function el(tag, attrs = {}, ...children) {
  const node = document.createElement(tag);
  for (const [key, value] of Object.entries(attrs)) {
    if (key === "text") node.textContent = value;
    else if (key === "className") node.className = value;
    else node.setAttribute(key, value);
  }
  for (const child of children) if (child) node.append(child);
  return node;
}

function bar(parts, total, small = false) {
  const node = el("div", { className: small ? "bar small" : "bar" });
  for (const [className, value] of parts) {
    const width = total > 0 ? Math.min(100, (100 * value) / total) : 0;
    const fill = el("span", { className, "data-tokens": String(value) });
    fill.style.width = `${width.toFixed(2)}%`;
    node.append(fill);
  }
  return node;
}

function fillBar(node, parts, total) {
  node.replaceChildren(...bar(parts, total).children);
}

async function api(path, options = {}) {
  const response = await fetch(path, options);
  const body = response.headers.get("content-type")?.includes("json") ? await response.json() : await response.text();
  if (!response.ok) throw new Error(body?.message || body?.detail || body?.error || `HTTP ${response.status}`);
  return body;
}

const asUser = (extra = {}) => ({ Authorization: `Bearer ${state.user}`, ...extra });
const newId = () => (crypto.randomUUID ? crypto.randomUUID() : `t${Date.now()}${Math.random().toString(16).slice(2)}`);
const ms = (value) => (value == null ? "–" : `${Math.round(value)} ms`);
// "1 model call", "2 model calls": every count the page shows goes through here.
const count = (n, one, many = `${one}s`) => `${n} ${n === 1 ? one : many}`;

function notice(text) {
  $("notice").textContent = text;
}

function bubble(role, text, extra = "") {
  const node = el("div", { className: `bubble ${role} ${extra}`.trim(), text });
  $("chat-log").append(node);
  reveal(node);
  return node;
}

// The newest message whole in view: the chat log scrolled to its end, and the panel and the page
// around it as far as it takes. Called again as a streamed reply grows, and when the turn ends.
function reveal(node) {
  $("chat-log").scrollTop = $("chat-log").scrollHeight;
  node.scrollIntoView({ block: "nearest" });
}

// ---- the plan: what the model saw ----
function renderPlan(plan, caption, matches) {
  $("plan-caption").textContent = caption;
  if (!plan) {
    for (const id of ["sections", "window", "left-out", "current", "budget-bar"]) $(id).replaceChildren();
    fillBar($("window-bar"), [["fill", 0]], 1);
    $("budget-text").textContent = "no model call: answered without the model, or refused before it";
    $("window-text").textContent = "–";
    $("plan-match").textContent = "";
    return;
  }
  $("budget-text").textContent =
    `${plan.totalTokens} of ${count(plan.budget, "token")} (system ${plan.systemTokens}, window ${plan.windowTokens}, current message ${plan.currentTokens})`;
  fillBar($("budget-bar"), [["seg-system", plan.systemTokens], ["seg-window", plan.windowTokens], ["seg-current", plan.currentTokens]], plan.budget);
  $("window-text").textContent =
    `${plan.window.length} of at most ${count(plan.windowMaxMessages, "message")}, ${plan.windowTokens} of ${count(plan.windowAvailableTokens, "token")} left for it`;
  fillBar($("window-bar"), [["fill", plan.windowTokens]], plan.windowAvailableTokens);
  $("plan-match").textContent = matches == null ? "" : matches ? "sent exactly" : "differs from the request";
  $("plan-match").className = matches == null ? "badge" : matches ? "badge ok" : "badge bad";
  const dropped = plan.summaryLinesDropped ? ` (${count(plan.summaryLinesDropped, "oldest summary line")} cut by the allowance)` : "";
  $("sections").replaceChildren(
    ...plan.sections.map((section) =>
      el("li", { "data-kind": section.kind },
        el("strong", { text: section.title }), el("span", { className: "kind", text: section.kind.replace("_", " ") }),
        el("span", { className: "muted", text: ` ${count(section.tokens, "token")}` }),
        bar([["fill", section.tokens]], plan.systemAllowance, true),
        el("details", {}, el("summary", { text: "text" }), el("pre", { text: section.text })))),
  );
  if (dropped) $("sections").append(el("li", { className: "muted", text: dropped }));
  $("window").replaceChildren(
    ...plan.window.map((message) =>
      el("li", { "data-message-id": message.messageId },
        el("strong", { text: message.role }), el("span", { className: "muted", text: ` ${count(message.tokens, "token")}` }),
        bar([["fill", message.tokens]], plan.windowAvailableTokens, true),
        el("pre", { text: [message.text, ...message.toolCalls.map((c) => `→ ${c.name}(${c.args})`)].filter(Boolean).join("\n") }))),
  );
  $("current").replaceChildren(el("span", { className: "muted", text: `${count(plan.currentTokens, "token")} ` }), el("pre", { text: plan.current }));
  $("left-out").replaceChildren(
    ...plan.leftOut.map((message) =>
      el("li", { title: message.detail },
        el("span", { className: "reason", text: message.reason.replaceAll("_", " ") }), " ",
        el("strong", { text: message.role }), el("pre", { text: message.text }))),
  );
  if (!plan.leftOut.length) $("left-out").append(el("li", { className: "muted", text: "nothing: every loaded message is in the window" }));
}

function renderRequests(requests) {
  $("model-requests").replaceChildren(
    ...requests.map((request, index) =>
      el("details", {}, el("summary", { text: `#${index + 1} ${request.operation}: ${count(request.messages.length, "message")}, tools ${request.tools.join(", ") || "none"}` }),
        el("pre", { text: request.system }), el("pre", { text: JSON.stringify(request.messages, null, 1) }))),
  );
}

// ---- the memory ----
const clock = (at) => (at ? new Date(at).toLocaleTimeString() : "");

// Where a value came from, in words: when it was said and the message that said it.
function provenance(origin, saidAt = origin?.savedAt) {
  if (!origin && !saidAt) return "";
  const when = saidAt ? `said ${clock(saidAt)}` : "saved";
  return origin?.userSaid ? `${when} in “${origin.userSaid}”` : when;
}

function answerCell(answer) {
  const cell = el("td");
  const value = answer.value ?? (answer.skipped ? "(skipped)" : "–");
  cell.append(el("div", { className: answer.value == null ? "value muted" : "value", text: value }));
  if (answer.value != null) {
    const said = provenance(answer.provenance, answer.saidAt);
    if (said) cell.append(el("div", { className: "said muted", text: said }));
  }
  for (const earlier of answer.earlier || []) {
    const until = earlier.replacedAt ? `, until ${clock(earlier.replacedAt)}` : "";
    const since = earlier.saidAt ? ` (said ${clock(earlier.saidAt)}${until})` : until ? ` (${until.slice(2)})` : "";
    cell.append(el("div", { className: "earlier muted", text: `earlier: “${earlier.value}”${since}` }));
  }
  return cell;
}

function renderMemory(memory, changed = []) {
  $("memory-step").textContent = memory.completedAt ? `${memory.stepTitle} (onboarding complete)` : memory.stepTitle;
  const waiting = memory.waitingFor;
  $("memory-waiting").textContent = waiting ? `waiting for ${waiting.field} (asked ${waiting.attempts}×)` : "";
  const rows = [];
  let step = "";
  for (const answer of memory.answers) {
    if (answer.step !== step) {
      step = answer.step;
      rows.push(el("tr", { className: "step-row" }, el("td", { colspan: "2", text: step.replaceAll("_", " ") })));
    }
    rows.push(el("tr", { "data-path": `answers.${answer.step}.${answer.field}`, title: answer.question },
      el("td", { className: "item", text: answer.field.replaceAll("_", " ") }), answerCell(answer)));
  }
  $("answers").tBodies[0].replaceChildren(...rows);
  $("profile").replaceChildren(
    ...memory.profile.map((entry) =>
      el("li", { "data-path": entry.field === "other" ? `profile.other.${entry.value}` : `profile.${entry.field}` },
        el("strong", { text: `${entry.field.replaceAll("_", " ")}: ` }), entry.value,
        el("div", { className: "said muted", text: provenance(entry.provenance) }))),
  );
  if (!memory.profile.length) $("profile").append(el("li", { className: "muted", text: "nothing yet" }));
  $("summary").textContent = memory.summary ?? "(no summary yet)";
  $("phones").replaceChildren(...memory.phones.map((phone) => el("li", { text: phone })));
  if (!memory.phones.length) $("phones").append(el("li", { className: "muted", text: "none" }));
  const checkIn = memory.checkIn;
  $("check-in").textContent = !checkIn
    ? "none scheduled"
    : `${checkIn.schedule}${checkIn.paused ? ", paused (STOP)" : ""}; next: ${checkIn.nextAt ?? "none while paused"}`;
  for (const node of document.querySelectorAll("#memory-panel [data-path]")) {
    node.classList.toggle("changed", changed.includes(node.getAttribute("data-path")));
  }
}

// ---- per-turn figures ----
function renderFigures(record, browser = {}) {
  const f = record.figures;
  $("fig-first-token").textContent = record.channel === "sms" ? "– (an SMS arrives whole)" : `${ms(browser.firstToken)} in the browser, ${ms(f.firstTokenMs)} at the server`;
  $("fig-turn").textContent = browser.whole != null ? `${ms(browser.whole)} in the browser, ${ms(f.turnMs)} at the server` : `${ms(f.turnMs)} at the server`;
  $("fig-tokens").textContent = `${f.tokens.input} / ${f.tokens.output} (${count(f.tokens.modelCalls, "model call")})`;
  const ops = Object.entries(f.dynamodb.byOperation).map(([name, count]) => `${name} ${count}`).join(", ");
  $("fig-dynamodb").textContent = `${f.dynamodb.requests}${ops ? ` (${ops})` : ""}${f.dynamodb.failed ? `, ${f.dynamodb.failed} failed` : ""}`;
  $("fig-capacity").textContent = `${f.dynamodb.capacityUnits}` + (f.dynamodb.requestsWithoutCapacity ? ` (+ ${count(f.dynamodb.requestsWithoutCapacity, "request")} the table gave no figure for)` : "");
  $("fig-cost").textContent = f.costUsd == null ? `– (${f.costNote})` : `$${f.costUsd.toFixed(6)} (${f.costNote})`;
}

function showTurn(record, browser = state.measured[record.turnId] || {}) {
  const caption = `Turn ${record.turnId.slice(0, 8)} (${record.channel}, ${record.status}) at ${new Date(record.startedAt).toLocaleTimeString()}`;
  renderPlan(record.plan, record.note ? `${caption}: ${record.note}` : caption, record.planMatchesRequest);
  renderRequests(record.modelRequests);
  if (record.memoryAfter && record.userId === state.user) {
    const latest = state.turns.at(-1)?.record.turnId === record.turnId;
    $("memory-title").textContent = latest ? "The memory now" : "The memory after this turn";
    renderMemory(record.memoryAfter, record.changed);
  }
  renderFigures(record, browser);
}

function addTurn(record, browser = {}) {
  if (browser.whole != null) state.measured[record.turnId] = browser;
  browser = state.measured[record.turnId] || browser;
  state.turns.push({ record, browser });
  const option = el("option", { value: record.turnId, text: `${state.turns.length}. ${record.channel} · ${record.status}` });
  $("turns").append(option);
  $("turns").value = record.turnId;
  showTurn(record, browser);
}

// ---- actions ----
// Every panel back to its start for another user: what it shows, and where it is scrolled to.
function resetPanels(user) {
  for (const node of document.querySelectorAll(".who")) node.textContent = user;
  for (const id of ["turns", "chat-log", "model-requests"]) $(id).replaceChildren();
  for (const node of document.querySelectorAll("#figures dd")) node.textContent = "–";
  for (const panel of document.querySelectorAll(".panel")) panel.scrollTop = 0;
  window.scrollTo(0, 0);
  notice("");
}

async function loadUser(user) {
  state.user = user;
  state.turns = [];
  $("user-id").value = user;
  resetPanels(user);
  history.replaceState(null, "", `#${encodeURIComponent(user)}`);
  const memory = await api(`/console/api/users/${encodeURIComponent(user)}/memory`);
  $("memory-title").textContent = "The memory now";
  renderMemory(memory);
  if (!state.session.readOnly) {
    const page = await api("/history?limit=20", { headers: asUser() });
    for (const message of page.messages.reverse()) bubble(message.role, message.content);
  }
  const recorded = await api(`/console/api/users/${encodeURIComponent(user)}/turns`);
  for (const record of recorded.turns) addTurn(record);
  if (!recorded.turns.length) {
    const plan = await api(`/console/api/users/${encodeURIComponent(user)}/prompt`);
    renderPlan(plan, "What the model would get for the next message (no turn recorded by this console yet)", null);
  }
  for (const panel of document.querySelectorAll(".panel")) panel.scrollTop = 0;
  const newest = $("chat-log").lastElementChild;
  if (newest) reveal(newest);
  document.body.dataset.user = user;
}

async function sendMessage(text) {
  const turnId = newId();
  bubble("user", text);
  const reply = bubble("assistant", "");
  reply.dataset.streaming = "true";
  $("turn-status").textContent = "streaming…";
  const started = performance.now();
  let firstToken = null;
  const response = await fetch("/chat", {
    method: "POST",
    headers: asUser({ Accept: "text/event-stream", "Content-Type": "application/json", "X-Console-Turn": turnId }),
    body: JSON.stringify({ message: text }),
  });
  if (!response.ok || !response.headers.get("content-type")?.includes("text/event-stream")) {
    const body = await response.json().catch(() => ({}));
    reply.textContent = `[${body.error || response.status}] ${body.message || ""}`;
    reply.classList.add("error");
  } else {
    const reader = response.body.getReader();
    const decoder = new TextDecoder();
    let buffer = "";
    for (;;) {
      const { value, done } = await reader.read();
      if (done) break;
      buffer += decoder.decode(value, { stream: true }).replaceAll("\r\n", "\n");
      let cut;
      while ((cut = buffer.indexOf("\n\n")) >= 0) {
        const block = buffer.slice(0, cut);
        buffer = buffer.slice(cut + 2);
        const event = /^event: (.*)$/m.exec(block)?.[1];
        const data = block.split("\n").filter((line) => line.startsWith("data: ")).map((line) => line.slice(6)).join("\n");
        const payload = data ? JSON.parse(data) : {};
        if (event === "chunk") {
          if (firstToken == null) firstToken = performance.now() - started;
          reply.textContent += payload.text;
          reveal(reply);
        } else if (event === "error") {
          reply.append(el("div", { className: "error", text: `[${payload.error}] ${payload.message}` }));
        }
      }
    }
  }
  const whole = performance.now() - started;
  delete reply.dataset.streaming;
  $("turn-status").textContent = "";
  const record = await api(`/console/api/turns/${turnId}`);
  addTurn(record, { firstToken, whole });
  reveal(reply);
  document.body.dataset.turns = String(state.turns.length);
}

async function sendSms(from, text) {
  const sent = bubble("user", text, "sms");
  $("turn-status").textContent = "texting…";
  const result = await api("/console/api/sms", {
    method: "POST",
    headers: { "Content-Type": "application/json" },
    body: JSON.stringify({ from, text, userId: state.user }),
  });
  $("turn-status").textContent = "";
  const owner = result.turn.userId;
  if (owner && owner !== state.user) {
    // Another user's conversation: every panel keeps showing this one, and the page says so.
    sent.remove();
    notice(`That text went to user ${owner}, not ${state.user}: this page still shows ${state.user} (switch to ${owner} to see it).`);
  } else {
    bubble("assistant", result.turn.reply || "(no reply)", "sms");
    addTurn(result.turn);
  }
  document.body.dataset.texts = String(Number(document.body.dataset.texts || 0) + 1);
  document.body.dataset.turns = String(state.turns.length);
  return result;
}

async function linkPhone() {
  const phone = $("sms-from").value;
  const link = await api("/phone-links", { method: "POST", headers: asUser() });
  notice(`Link code ${link.code}: texting LINK ${link.code}, then YES when asked, from ${phone}`);
  await sendSms(phone, `LINK ${link.code}`);
  await sendSms(phone, "YES"); // the phone agrees to the link (nothing is linked before)
  renderMemory(await api(`/console/api/users/${encodeURIComponent(state.user)}/memory`), ["phones"]);
}

async function erase() {
  if (!window.confirm(`Erase everything stored for ${state.user}?`)) return;
  const receipt = await api("/me", { method: "DELETE", headers: asUser() });
  notice(`Erased ${count(receipt.total, "item")} of ${state.user}.`);
  const memory = await api(`/console/api/users/${encodeURIComponent(state.user)}/memory`);
  $("chat-log").replaceChildren();
  renderMemory(memory, ["step", "summary", "phones"]);
  document.body.dataset.erased = state.user;
}

function guarded(action) {
  return async (event) => {
    event?.preventDefault();
    if (state.busy) return;
    state.busy = true;
    for (const button of document.querySelectorAll("button")) button.disabled = true;
    try {
      await action();
    } catch (error) {
      notice(`Error: ${error.message}`);
    } finally {
      state.busy = false;
      for (const button of document.querySelectorAll("button")) button.disabled = false;
    }
  };
}

async function start() {
  state.session = await api("/console/api/session");
  const s = state.session;
  $("mode").textContent = s.mode === "local" ? "local stack" : `AWS · ${s.tableName} · read only${s.personalData ? "" : " · texts redacted"}`;
  document.body.classList.toggle("read-only", s.readOnly);
  const users = await api("/console/api/users");
  $("users").replaceChildren(...users.users.map((user) => el("option", { value: user })));
  $("user-form").addEventListener("submit", guarded(() => loadUser($("user-id").value.trim())));
  $("chat-form").addEventListener("submit", guarded(async () => {
    const text = $("message").value;
    $("message").value = "";
    await sendMessage(text);
  }));
  $("sms-form").addEventListener("submit", guarded(async () => {
    const text = $("sms-text").value;
    $("sms-text").value = "";
    await sendSms($("sms-from").value, text);
  }));
  $("link-phone").addEventListener("click", guarded(linkPhone));
  $("erase").addEventListener("click", guarded(erase));
  $("turns").addEventListener("change", () => {
    const turn = state.turns.find((t) => t.record.turnId === $("turns").value);
    if (turn) showTurn(turn.record, turn.browser);
  });
  // The chat's default user first: `infra.chat` and this page show the same memory.
  const initial = decodeURIComponent(location.hash.slice(1)) || s.defaultUser;
  await guarded(() => loadUser(initial))();
  document.body.dataset.ready = "true";
}

start().catch((error) => notice(`Error: ${error.message}`));
