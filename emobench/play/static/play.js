// emobench play: the page's script. Every text from the server is written with textContent,
// never as HTML; the server's Content-Security-Policy forbids inline script besides.
"use strict";

const $ = (id) => document.getElementById(id);
// The page's words in its language (ui/<language>.yaml, "script"), handed over by the server.
const T = JSON.parse(document.body.dataset.ui);

function el(tag, text, cls) {
  const node = document.createElement(tag);
  if (text !== undefined && text !== null) node.textContent = String(text);
  if (cls) node.className = cls;
  return node;
}

// One key per action (a click): the server plays a double-sent or retried request once and
// answers it with the first response.
function actionKey() {
  const bytes = new Uint8Array(16);
  window.crypto.getRandomValues(bytes);
  return Array.from(bytes, (b) => b.toString(16).padStart(2, "0")).join("");
}

async function api(method, path, body, key) {
  const options = { method, headers: { "Content-Type": "application/json" } };
  if (key) options.headers["Idempotency-Key"] = key;
  if (body !== undefined) options.body = JSON.stringify(body);
  const response = await fetch(path, options);
  let data = {};
  try { data = await response.json(); } catch (e) { data = { error: T.no_answer }; }
  if (!response.ok) throw new Error(data.error || response.statusText);
  return data;
}

function showError(text) { $("error").textContent = text || ""; }

// --- the start page -------------------------------------------------------------------
function startPage() {
  $("join").addEventListener("click", async () => {
    showError("");
    try {
      const data = await api("POST", "/api/join", { handle: $("handle").value, consent: $("agree").checked });
      window.location.assign("/p/" + encodeURIComponent(data.token));
    } catch (e) { showError(e.message); }
  });
}

// --- a player's page ------------------------------------------------------------------
const token = decodeURIComponent(window.location.pathname.split("/")[2] || "");
const base = "/api/p/" + encodeURIComponent(token);
let current = null;  // the episode on screen
const skipped = new Set();  // episodes whose rating the person chose to skip on this page
let seat = "user";

function fill(select, items, label) {
  select.replaceChildren();
  for (const item of items) {
    const option = el("option", label(item));
    option.value = item.id !== undefined ? item.id : item;
    select.appendChild(option);
  }
}

async function loadPlayer() {
  const data = await api("GET", base);
  $("handle").textContent = data.handle;
  fill($("case"), data.cases, (c) => c.id + " — " + c.persona + ": " + c.topic);
  if ($("subject")) fill($("subject"), data.subjects, (s) => T.model + " " + s);
  const body = $("episodes").tBodies[0];
  body.replaceChildren();
  for (const ep of data.episodes) {
    const row = document.createElement("tr");
    row.dataset.id = ep.id;
    for (const text of [ep.case, ep.subject, ep.started.replace("T", " ").slice(0, 16), ep.finished ? T.finished : T.in_progress]) {
      row.appendChild(el("td", text));
    }
    const cell = el("td");
    const open = el("button", ep.finished ? T.see : T.resume, "open");
    open.addEventListener("click", () => openEpisode(ep.id));
    const del = el("button", T.delete, "quiet delete");
    del.addEventListener("click", async () => {
      if (!window.confirm(T.confirm_delete)) return;
      try {
        const done = await api("DELETE", base + "/episodes/" + ep.id);
        if (done.player_forgotten) { forgotten(); return; }
        await loadPlayer();
      } catch (e) { showError(e.message); }
    });
    cell.append(open, " ", del);
    row.appendChild(cell);
    body.appendChild(row);
  }
}

function forgotten() {
  $("pick").replaceChildren(el("p", T.forgotten));
}

function render(view) {
  current = view;
  window.location.hash = "e=" + view.id;
  $("pick").classList.add("hidden");
  $("play").classList.remove("hidden");
  if (seat === "user") {
    $("card").textContent = view.card;
    $("meter-now").textContent = view.meter;
    $("guidance").textContent = view.guidance || T.no_guidance;
    if (view.your_turn) { $("meter").value = view.meter; $("meter-value").textContent = view.meter; }
  }
  const list = $("conversation");
  list.replaceChildren();
  for (const m of view.messages) {
    const mine = (m.who === "user") === (seat === "user");
    const item = el("li", null, mine ? "mine" : "theirs");
    item.appendChild(el("span", mine ? T.you : (seat === "user" ? T.model_named + view.subject : T.they), "who"));
    item.appendChild(el("p", m.text));
    list.appendChild(item);
  }
  $("compose").classList.toggle("hidden", view.done);
  $("send").disabled = !view.your_turn && !view.error;
  showError(view.error || "");
  // The person rates the supporter before seeing the judges' verdicts, so theirs is their own.
  const asking = Boolean(view.rating && !view.rating.given && !skipped.has(view.id));
  if ($("rating")) {
    $("rating").classList.toggle("hidden", !asking);
    if (asking) renderRating(view.rating);
  }
  $("result").classList.toggle("hidden", !view.done || asking);
  if (view.done && view.result) renderResult(view.result);
  list.lastElementChild && list.lastElementChild.scrollIntoView({ block: "end" });
}

function renderRating(rating) {
  const fields = $("rating-fields");
  fields.replaceChildren();
  for (const dim of rating.dimensions) {
    const label = el("label", T.dimensions[dim] + " ");
    const select = el("select");
    select.dataset.dimension = dim;
    select.appendChild(el("option", "–"));
    select.lastChild.value = "";
    for (let v = rating.scale[0]; v <= rating.scale[1]; v++) select.appendChild(el("option", v));
    label.appendChild(select);
    fields.appendChild(label);
  }
}

function chosenRatings() {
  const ratings = {};
  for (const select of $("rating-fields").querySelectorAll("select")) {
    if (select.value) ratings[select.dataset.dimension] = Number(select.value);
  }
  return ratings;
}

function renderResult(result) {
  $("summary").textContent = T.ended + result.stop_reason.replace(/_/g, " ") +
    (result.status ? T.epm_status + result.status : "") + T.final_meter + result.final_meter;
  const body = $("verdicts").tBodies[0];
  body.replaceChildren();
  for (const t of result.turns) {
    const row = document.createElement("tr");
    const level = (axis) => (t.valid ? String(t.progress[axis]) : "–");
    const setbacks = t.valid ? Object.values(t.regression).reduce((a, b) => a + b, 0) : "–";
    for (const text of [t.index, level("C"), level("A"), level("P"), setbacks]) row.appendChild(el("td", text));
    body.appendChild(row);
  }
  const dims = Object.entries(result.holistic).map(([k, v]) => k.replace(/_/g, " ") + " " + v + "/10");
  $("holistic").textContent = dims.length ? T.whole_conversation + dims.join(" · ") : "";
}

async function busy(step) {
  $("busy").classList.remove("hidden");
  $("send").disabled = $("leave").disabled = true;
  showError("");
  try { return await step(); } catch (e) { showError(e.message); return null; }
  finally { $("busy").classList.add("hidden"); $("send").disabled = $("leave").disabled = false; }
}

function move() {
  const body = { message: $("message").value };
  if (seat === "user") body.meter = Number($("meter").value);
  return body;
}

async function openEpisode(id) {
  const view = await busy(() => api("GET", base + "/episodes/" + id));
  if (view) render(view);
}

function playerPage() {
  seat = document.body.dataset.seat;
  if ($("meter")) $("meter").addEventListener("input", () => { $("meter-value").textContent = $("meter").value; });
  const start = async (body) => {
    const key = actionKey();
    const view = await busy(() => api("POST", base + "/episodes", body, key));
    if (view) render(view);
    else { $("pick").classList.add("hidden"); $("play").classList.remove("hidden"); }
  };
  $("start").addEventListener("click", () => start({ case: $("case").value, subject: $("subject") ? $("subject").value : null }));
  $("any").addEventListener("click", () => start({ subject: $("subject") ? $("subject").value : null }));
  $("send").addEventListener("click", async () => {
    if (!current) return;
    const key = actionKey();
    const body = move();
    const retry = current.retry_opening;  // the model's first reply is missing: ask again, keep the text
    if (retry) body.message = "";
    const view = await busy(() => api("POST", base + "/episodes/" + current.id + "/turn", body, key));
    if (view) { if (!retry) $("message").value = ""; render(view); }
  });
  $("leave").addEventListener("click", async () => {
    if (!current) return;
    const body = move();
    if (seat !== "user" && body.message.trim()) {
      // An unsent reply is never dropped silently: keep it to send, or end without it on purpose.
      if (!window.confirm(T.confirm_end)) return;
      body.message = "";
    }
    const key = actionKey();
    const view = await busy(() => api("POST", base + "/episodes/" + current.id + "/leave", body, key));
    if (view) { $("message").value = ""; render(view); }
  });
  if ($("rating")) {
    $("rate").addEventListener("click", async () => {
      if (!current) return;
      const ratings = chosenRatings();
      if (!Object.keys(ratings).length) { showError(T.rate_something); return; }
      const view = await busy(() => api("POST", base + "/episodes/" + current.id + "/rating", ratings));
      if (view) render(view);
    });
    $("rate-skip").addEventListener("click", () => { if (current) { skipped.add(current.id); render(current); } });
  }
  $("back").addEventListener("click", async () => {
    current = null;
    history.replaceState(null, "", window.location.pathname);
    $("play").classList.add("hidden");
    $("pick").classList.remove("hidden");
    showError("");
    await loadPlayer();
  });
  loadPlayer().then(() => {
    const match = window.location.hash.match(/^#e=([0-9a-f]{16})$/);
    if (match) openEpisode(match[1]);
  }).catch((e) => showError(e.message));
}

document.addEventListener("DOMContentLoaded", () => {
  if (document.body.dataset.page === "start") startPage(); else playerPage();
});
