// The learner's page: reads the signed initData (from Telegram, or from the URL fragment when
// telegram-web-app.js is absent, as in a test or a link from `memora app-url`), fetches the
// data with it in the Authorization header, and renders it with textContent only.
"use strict";

const tg = window.Telegram && window.Telegram.WebApp;
const initData = (tg && tg.initData) ||
  new URLSearchParams(location.hash.slice(1)).get("tgWebAppData") || "";
let L = {};  // the page's words, in the learner's language (sent with the data)
let data = null;
let tab = "memories";

function el(tag, attrs, ...children) {
  const node = document.createElement(tag);
  for (const [k, v] of Object.entries(attrs || {})) {
    if (k === "onclick") node.addEventListener("click", v);
    else if (v !== null && v !== undefined && v !== false) node.setAttribute(k, v);
  }
  for (const c of children) if (c !== null && c !== undefined) {
    node.append(typeof c === "string" ? document.createTextNode(c) : c);
  }
  return node;
}

class Refused extends Error {}

async function call(method, path, body) {
  const headers = { Authorization: "tma " + initData };
  if (body !== undefined) headers["Content-Type"] = "application/json";
  const r = await fetch("/app/api/" + path, {
    method, headers, body: body === undefined ? undefined : JSON.stringify(body),
    cache: "no-store", credentials: "omit",
  });
  if (r.status === 401) {
    const e = await r.json().catch(() => ({}));
    throw new Refused(e.error || L.reopen || "Please reopen this page from the chat.");
  }
  if (r.status === 429) throw new Error(L.too_many);
  if (!r.ok) {
    const e = await r.json().catch(() => ({}));
    throw new Error(e.error || L.failed);
  }
  return r;
}

function ask(text) {
  return new Promise((resolve) => {
    if (tg && tg.showConfirm && tg.initData) tg.showConfirm(text, resolve);
    else resolve(window.confirm(text));
  });
}

function tell(text) {
  if (tg && tg.showAlert && tg.initData) tg.showAlert(text);
  else window.alert(text);
}

function status(text) {
  const main = document.getElementById("main");
  main.replaceChildren(el("p", { id: "status", class: "muted" }, text));
}

function notice(text) {
  document.getElementById("main").prepend(el("p", { id: "notice", class: "card notice",
    role: "status" }, text));
}

async function act(fn) {
  try {
    await fn();
  } catch (e) {
    if (e instanceof Refused) { document.getElementById("actions").hidden = true; status(e.message); }
    else tell(e.message || L.failed);
  }
}

const day = (iso) => (iso ? String(iso).slice(0, 10) : "");

function memoryCard(m) {
  const card = el("article", { class: "card memory", "data-id": m.id });
  const text = el("div", { class: "text" }, m.text);
  const badges = el("span", null,
    m.pinned ? el("span", { class: "badge" }, L.pinned) : null,
    m.since ? el("span", { class: "meta" }, ` ${L.since} ${m.since}`) : null,
    m.until ? el("span", { class: "meta" }, ` ${L.until} ${m.until}`) : null);
  const meta = el("div", { class: "meta" },
    `${L.saved_on} ${day(m.created_at)}` +
    (m.updated_at && m.updated_at !== m.created_at ? ` · ${L.updated_on} ${day(m.updated_at)}` : "") +
    ` · ${m.category} · ${m.source}`);
  card.append(text, badges, meta);
  if (m.source_message) {
    card.append(el("div", { class: "quote" }, el("span", { class: "meta" }, L.from_message + " "),
      m.source_message));
  }
  if (m.history.length) {
    card.append(el("div", { class: "meta" }, `${L.was} ${m.history[m.history.length - 1].text}`));
  }
  const row = el("div", { class: "row" });
  row.append(el("button", { class: "plain edit", type: "button", onclick: () => edit(card, m) }, L.edit));
  if (m.history.length) {
    row.append(el("button", { class: "plain undo", type: "button", onclick: () => act(async () => {
      await call("POST", `memories/${encodeURIComponent(m.id)}/undo`);
      await load();
    }) }, L.undo));
  }
  row.append(el("button", { class: "plain pin", type: "button", onclick: () => act(async () => {
    const path = `memories/${encodeURIComponent(m.id)}/pin`;
    const answer = await (await call(m.pinned ? "DELETE" : "PUT", path)).json();
    await load();
    notice(answer.message);  // /pin's answer, its warning when the pins are over the budget
  }) }, m.pinned ? L.unpin : L.pin));
  row.append(el("button", { class: "plain danger delete", type: "button", onclick: () => act(async () => {
    if (!(await ask(L.confirm_delete))) return;
    await call("DELETE", `memories/${encodeURIComponent(m.id)}`);
    data.memories = data.memories.filter((x) => x.id !== m.id);
    card.remove();
    if (!data.memories.length) render();
  }) }, L.delete));
  card.append(row);
  return card;
}

function edit(card, m) {
  const box = el("textarea", { maxlength: "500" });
  box.value = m.text;
  const form = el("div", { class: "row" },
    el("button", { type: "button", onclick: () => act(async () => {
      await call("PATCH", `memories/${encodeURIComponent(m.id)}`, { text: box.value });
      await load();
    }) }, L.save),
    el("button", { class: "plain", type: "button", onclick: render }, L.cancel));
  card.replaceChildren(box, form);
  box.focus();
}

function profileCard(f) {
  const input = el("input", { type: "text", maxlength: "120", placeholder: f.help });
  input.value = f.value || "";
  const card = el("article", { class: "card field", "data-field": f.field },
    el("div", null, el("strong", null, f.field), " ",
      el("span", { class: "meta" }, f.value ? `${L.source} ${f.source} · ${day(f.updated_at)}` : L.empty)),
    input,
    el("div", { class: "row" },
      el("button", { type: "button", onclick: () => act(async () => {
        await call("PUT", `profile/${f.field}`, { value: input.value });
        await load();
      }) }, L.save),
      f.value ? el("button", { class: "plain danger", type: "button", onclick: () => act(async () => {
        await call("DELETE", `profile/${f.field}`);
        await load();
      }) }, L.clear) : null));
  if (f.history.length) {
    const list = el("ul", { class: "meta" });
    for (const c of f.history) {
      list.append(el("li", null, `${day(c.at)} ${c.old || "—"} → ${c.new || "—"} (${c.source})` +
        (c.undone ? " ↩" : "")));
    }
    card.append(el("details", null, el("summary", null, L.history), list));
  }
  return card;
}

function entryCard(kind, e) {
  const head = kind === "mistakes" ? `“${e.original}” → “${e.corrected}”` : `${e.term} — ${e.meaning}`;
  const detail = kind === "mistakes" ? `${e.category} · ${e.reason}` : e.example;
  const card = el("article", { class: "card entry" }, el("div", { class: "text" }, head),
    detail ? el("div", { class: "meta" }, detail) : null,
    el("div", { class: "meta" }, day(e.at) +
      (kind === "words" && e.next_review ? ` · ${L.next_review} ${day(e.next_review)}` : "")));
  card.append(el("div", { class: "row" }, el("button", { class: "plain danger", type: "button",
    onclick: () => act(async () => {
      if (!(await ask(L.confirm_delete))) return;
      await call("DELETE", `${kind}/${e.id}`);
      await load();
    }) }, L.delete)));
  return card;
}

function bars(values, labels, fmt) {
  const ns = "http://www.w3.org/2000/svg";
  const svg = document.createElementNS(ns, "svg");
  svg.setAttribute("class", "bars");
  svg.setAttribute("viewBox", "0 0 300 160");
  svg.setAttribute("preserveAspectRatio", "none");
  const top = Math.max(1e-9, ...values);
  const w = 300 / Math.max(1, values.length);
  values.forEach((v, i) => {
    const h = (v / top) * 130;
    const r = document.createElementNS(ns, "rect");
    r.setAttribute("x", String(i * w + 1)); r.setAttribute("width", String(Math.max(1, w - 2)));
    r.setAttribute("y", String(140 - h)); r.setAttribute("height", String(h));
    const t = document.createElementNS(ns, "title");
    t.textContent = `${labels[i]}: ${fmt(v)}`;
    r.append(t);
    svg.append(r);
  });
  for (const [i, anchor] of [[0, "start"], [labels.length - 1, "end"]]) {
    if (i < 0) continue;
    const t = document.createElementNS(ns, "text");
    t.setAttribute("x", anchor === "start" ? "0" : "300"); t.setAttribute("y", "155");
    t.setAttribute("text-anchor", anchor);
    t.textContent = labels[i].slice(5);
    svg.append(t);
  }
  return svg;
}

async function image(path) {
  const blob = await (await call("GET", path)).blob();
  return el("img", { class: "chart", alt: L.progress, src: URL.createObjectURL(blob) });
}

const views = {
  memories: () => (data.memories.length ? data.memories.map(memoryCard)
    : [el("p", { class: "muted" }, L.no_memories)]),
  profile: () => data.profile.map(profileCard),
  mistakes: () => (data.mistakes.length ? data.mistakes.map((e) => entryCard("mistakes", e))
    : [el("p", { class: "muted" }, L.no_mistakes)]),
  words: () => (data.words.length ? data.words.map((e) => entryCard("words", e))
    : [el("p", { class: "muted" }, L.no_words)]),
  progress: () => {
    const holder = el("div");
    act(async () => holder.append(await image("progress.png")));
    return [holder, el("pre", null, data.progress)];
  },
  usage: () => {
    const holder = el("div");
    act(async () => {
      const u = await (await call("GET", "usage")).json();
      const days = u.days.map((d) => d.day);
      holder.append(el("h2", null, L.tokens_per_day),
        bars(u.days.map((d) => d.tokens), days, (v) => v.toLocaleString()));
      if (u.days.some((d) => d.cost !== null)) {
        holder.append(el("h2", null, `${L.cost_per_day} (${u.currency})`),
          bars(u.days.map((d) => d.cost || 0), days, (v) => v.toFixed(4)));
      }
      holder.append(el("pre", null, u.table));
    });
    return [holder];
  },
};

function render() {
  const tabs = document.getElementById("tabs");
  const names = ["memories", "profile", "mistakes", "words", "progress"];
  if (data.is_admin) names.push("usage");
  tabs.replaceChildren(...names.map((n) => el("button", {
    type: "button", role: "tab", "data-tab": n, "aria-selected": String(n === tab),
    onclick: () => { tab = n; render(); },
  }, L[n])));
  document.getElementById("main").replaceChildren(...views[tab]());
}

async function load() {
  data = await (await call("GET", "me")).json();
  L = data.labels;
  document.documentElement.lang = data.lang.replace("_", "-");
  document.title = L.title;
  document.getElementById("title").textContent = L.title;
  document.getElementById("download").textContent = L.download;
  document.getElementById("forget-me").textContent = L.forget_me;
  document.getElementById("actions").hidden = false;
  render();
}

document.getElementById("download").addEventListener("click", () => act(async () => {
  const blob = await (await call("GET", "export")).blob();
  const link = el("a", { href: URL.createObjectURL(blob), download: "memora-my-data.json" });
  document.body.append(link);
  link.click();
  link.remove();
}));

document.getElementById("forget-me").addEventListener("click", () => act(async () => {
  if (!(await ask(L.confirm_forget_me))) return;
  await call("POST", "forget-me", { confirm: "forget me" });
  document.getElementById("actions").hidden = true;
  document.getElementById("tabs").replaceChildren();
  status(L.forgotten);
}));

if (tg && tg.initData) { tg.ready(); tg.expand(); }
act(load);
