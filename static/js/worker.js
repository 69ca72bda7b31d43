/* Worker pages, shared behaviour: CSRF helper, time-on-step heartbeat, deadline countdown. */
(function () {
  "use strict";
  document.documentElement.classList.add("js");

  function csrfToken() {
    var input = document.querySelector("input[name=csrfmiddlewaretoken]");
    if (input) { return input.value; }
    var match = document.cookie.match(/(?:^|;\s*)csrftoken=([^;]+)/);
    return match ? decodeURIComponent(match[1]) : "";
  }
  window.workerCsrfToken = csrfToken;

  // Heartbeat: while the page is visible, tell the server every minute that this step is still open, so
  // long task steps are timed even when the worker never reloads the page.
  var context = document.getElementById("worker-context");
  if (context && window.fetch) {
    var ping = function () {
      if (document.visibilityState !== "visible") { return; }
      var body = new URLSearchParams();
      body.set("step", context.dataset.step);
      if (context.dataset.episode) { body.set("episode", context.dataset.episode); }
      fetch(context.dataset.pingUrl, {
        method: "POST", body: body, credentials: "same-origin",
        headers: { "X-CSRFToken": csrfToken(), "Accept": "application/json" }
      }).catch(function () { /* offline for a moment: the next ping catches up */ });
    };
    window.setInterval(ping, 60000);
    document.addEventListener("visibilitychange", ping);
  }

  // Deadline countdown (the server enforces the limit; this only informs).
  var deadline = document.getElementById("deadline");
  if (deadline && deadline.dataset.secondsLeft) {
    var end = Date.now() + parseInt(deadline.dataset.secondsLeft, 10) * 1000;
    var out = deadline.querySelector(".countdown");
    var tick = function () {
      var left = Math.max(0, Math.round((end - Date.now()) / 1000));
      if (out) {
        var h = Math.floor(left / 3600), m = Math.floor((left % 3600) / 60), s = left % 60;
        out.textContent = (h ? h + " h " : "") + m + " min " + (h ? "" : s + " s");
      }
      if (left === 0) {
        deadline.className = "warning";
        deadline.textContent = "The time limit has passed. You can still submit; the submission will be marked as late.";
        return;
      }
      window.setTimeout(tick, 1000);
    };
    tick();
  }

  // After a refused form the page is the form's answer: show the task page's own address (so a reload opens
  // the page) and bring the worker to the first field that needs a correction, focused.
  var address = document.getElementById("page-address");
  if (address && address.dataset.url && window.history && window.history.replaceState) {
    window.history.replaceState(null, "", address.dataset.url);
  }
  // Text kept from an earlier visit is marked where it is, but a later visit opens the page as usual.
  var invalid = document.querySelector("[aria-invalid='true']");
  if (invalid && !invalid.closest("[data-kept-draft]")) {
    var details = invalid.closest("details");
    if (details) { details.open = true; }
    // After the load event: focus given while the page is still loading does not always stay.
    var land = function () {
      invalid.scrollIntoView({ block: "center" });
      invalid.focus({ preventScroll: true });
    };
    if (document.readyState === "complete") { land(); } else { window.addEventListener("load", land); }
  }

  var resume = document.getElementById("resume-link");
  if (resume) { resume.addEventListener("focus", function () { resume.select(); }); }
})();
