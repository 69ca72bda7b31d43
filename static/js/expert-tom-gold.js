// ToM gold coding page: autosave the draft every few seconds after a change, reporting visible time.
(function () {
  "use strict";
  const form = document.getElementById("tom-form");
  if (!form) return;
  const statusBox = document.getElementById("autosave-status");
  const csrf = form.querySelector("input[name=csrfmiddlewaretoken]").value;
  let dirty = false, pending = 0;
  let since = document.visibilityState === "visible" ? Date.now() : null;
  function flush() {
    if (since !== null) { pending += (Date.now() - since) / 1000; since = document.visibilityState === "visible" ? Date.now() : null; }
  }
  function payload() {
    flush();
    const score = form.querySelector("input[name=score]:checked");
    return { score: score ? score.value : "", reason: form.querySelector("textarea[name=reason]").value,
             markers: Array.from(form.querySelectorAll("input[name=markers]:checked")).map((b) => b.value),
             visible_seconds: Math.round(pending) };
  }
  function save(keepalive) {
    const body = payload(); const sent = body.visible_seconds; dirty = false;
    fetch(form.dataset.autosaveUrl, { method: "POST", credentials: "same-origin", keepalive: Boolean(keepalive),
      headers: { "Content-Type": "application/json", "X-CSRFToken": csrf }, body: JSON.stringify(body) })
      .then((r) => r.json().then((data) => {
        if (r.ok) { pending = Math.max(0, pending - sent); statusBox.textContent = `Saved at ${new Date().toLocaleTimeString()}.`; }
        else { statusBox.textContent = data.error || "Not saved."; statusBox.classList.add("error"); }
      })).catch(() => { statusBox.textContent = "Not saved: no connection. Your answers are still on the page."; });
  }
  form.addEventListener("input", () => { dirty = true; });
  form.addEventListener("submit", () => { flush(); document.getElementById("id_visible_seconds").value = Math.round(pending); });
  document.addEventListener("visibilitychange", () => { flush(); if (document.visibilityState === "hidden" && dirty) save(true); });
  setInterval(() => { if (dirty) save(false); }, 5000);
})();
