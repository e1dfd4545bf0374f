// The eval page's tables and trajectory viewer. Trajectories are untrusted text: only textContent is set.
const DATA = JSON.parse(document.getElementById("data").textContent);
function el(tag, cls, text) {
  const e = document.createElement(tag);
  if (cls) e.className = cls;
  if (text !== undefined) e.textContent = text;
  return e;
}
const body = document.querySelector("#results tbody");
for (const r of DATA.results) {
  const tr = el("tr", "row");
  tr.dataset.key = r.instance_id + "#" + r.attempt;
  const cells = [r.instance_id, r.attempt, r.resolved ? "yes" : "no", r.exit_status, r.patch_source, r.n_steps,
    r.elapsed.toFixed(1), (r.cost_usd || 0).toFixed(4), r.error || ""];
  cells.forEach((c, i) => {
    const cls = i === 2 ? (r.resolved ? "ok" : "no") : (i === 8 && c ? "err" : "");
    tr.appendChild(el("td", cls, String(c)));
  });
  tr.addEventListener("click", () => { location.hash = encodeURIComponent(tr.dataset.key); });
  body.appendChild(tr);
}
const mt = document.querySelector("#metrics tbody");
for (const [k, v] of Object.entries(DATA.metrics)) {
  const tr = el("tr");
  tr.appendChild(el("td", "", k));
  tr.appendChild(el("td", "", Number(v).toFixed(3)));
  mt.appendChild(tr);
}
function show(key) {
  const viewer = document.getElementById("viewer");
  viewer.replaceChildren();
  const t = DATA.trajectories[key] || DATA.trajectories[key + "#0"];
  if (!t) return;
  const r = DATA.results.find(x => x.instance_id + "#" + x.attempt === key || x.instance_id === key) || {};
  viewer.appendChild(el("h2", "", "Trajectory: " + t.instance_id));
  const verdict = r.resolved ? "resolved" : "not resolved";
  viewer.appendChild(el("p", "meta", `model ${t.model} · exit ${t.exit_status} ${t.exit_message || ""} · ` +
    `${t.steps.length} steps · verdict: ${verdict} (${r.grade_status || r.error || "-"})`));
  t.messages.forEach((m, i) => {
    const d = el("div", "msg " + m.role);
    d.appendChild(el("b", "", m.role + (i > 1 ? " · turn " + Math.floor((i - 1) / 2) : "") + "\n"));
    d.appendChild(document.createTextNode(m.content));
    viewer.appendChild(d);
  });
  viewer.appendChild(el("h3", "", "Patch"));
  viewer.appendChild(el("pre", "patch", t.patch || "(empty)"));
}
window.addEventListener("hashchange", () => show(decodeURIComponent(location.hash.slice(1))));
if (location.hash) show(decodeURIComponent(location.hash.slice(1)));
