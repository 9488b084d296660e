// The console's script: select-all boxes, confirmations, and the
// overview's live counts. The pages work without it, but for the counts.
"use strict";
document.addEventListener("DOMContentLoaded", () => {
  for (const all of document.querySelectorAll("input.all")) {
    all.addEventListener("change", () => {
      for (const box of all.closest("table").querySelectorAll("tbody input[type=checkbox]")) box.checked = all.checked;
    });
  }
  for (const button of document.querySelectorAll("button[data-confirm]")) {
    button.addEventListener("click", (e) => { if (!confirm(button.dataset.confirm)) e.preventDefault(); });
  }
  const overview = document.getElementById("overview");
  if (overview) live(overview, Number(overview.dataset.refresh) || 2000);
});

// live reads api/stats every refresh milliseconds, and shows the counts
// and, for each transition, how many happened since the page opened and
// their rate per second.
function live(root, refresh) {
  let first = null;
  const tick = async () => {
    try {
      const res = await fetch("api/stats", { headers: { Accept: "application/json" } });
      if (!res.ok) return;
      const now = await res.json();
      now.t = Date.parse(now.at);
      if (!first) first = now;
      for (const el of root.querySelectorAll("[data-total]")) el.textContent = now.totals[el.dataset.total];
      const secs = (now.t - first.t) / 1000;
      for (const row of root.querySelectorAll("tr[data-stat]")) {
        const k = row.dataset.stat;
        const delta = now.stats[k] - first.stats[k];
        row.querySelector(".total").textContent = now.stats[k];
        row.querySelector(".delta").textContent = delta;
        row.querySelector(".rate").textContent = secs > 0 ? (delta / secs).toFixed(1) : "–";
      }
      const el = document.getElementById("elapsed");
      if (el) el.textContent = Math.round(secs) + " s ago";
    } catch (e) { /* the next tick tries again */ }
  };
  tick();
  setInterval(tick, refresh);
}
