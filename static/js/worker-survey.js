/* Survey autosave: the answers given within a few seconds (the form's data-autosave-ms) are sent together in one
   request, so a page of twenty answers costs the server a handful of requests, not twenty. Anything still pending
   is sent when the page is hidden (a reload or a closed tab loses nothing), and dropped when the form itself is
   submitted, which carries every answer. Answers that could not be sent are retried. */
(function () {
  "use strict";
  var form = document.getElementById("survey-form");
  if (!form || !window.fetch) { return; }
  var url = form.dataset.autosaveUrl;
  var windowMs = parseInt(form.dataset.autosaveMs, 10);
  if (!(windowMs >= 0)) { windowMs = 4000; }
  var status = document.getElementById("autosave-status");
  var pending = {}, failed = {}, timer = null, stopped = false;

  function codeOf(field) {
    var question = field.closest(".question");
    return question ? question.dataset.code : null;
  }

  function showError(code, text) {
    var question = document.getElementById("question-" + code);
    if (!question) { return; }
    var box = question.querySelector(".field-error");
    box.textContent = text || "";
    question.classList.toggle("has-error", !!text);
  }

  function payload(answers) {
    var body = new FormData();
    body.append("csrfmiddlewaretoken", window.workerCsrfToken());
    Object.keys(answers).forEach(function (code) {
      body.append("code", code);
      body.append("value", answers[code]);
    });
    return body;
  }

  function send() {
    window.clearTimeout(timer);
    timer = null;
    var batch = pending;
    pending = {};
    if (stopped || !Object.keys(batch).length) { return; }
    fetch(url, {
      method: "POST", body: payload(batch), credentials: "same-origin",
      headers: { "Accept": "application/json", "X-CSRFToken": window.workerCsrfToken() }
    }).then(function (r) { return r.json(); }).then(function (reply) {
      var errors = reply.errors || {};
      Object.keys(batch).forEach(function (code) { showError(code, errors[code] || ""); });
      if (Object.keys(pending).length) { return; }  // newer answers are on their way; keep saying so
      if (reply.ok) {
        var t = new Date();
        status.textContent = "All answers saved (" + t.toLocaleTimeString([], { hour: "2-digit", minute: "2-digit" }) + ").";
      } else if (Object.keys(errors).length) {
        status.textContent = "An answer needs a correction; your other answers are saved.";
      } else {
        status.textContent = reply.error || "Could not save just now.";
      }
    }).catch(function () {
      Object.keys(batch).forEach(function (code) { if (!(code in pending)) { failed[code] = batch[code]; } });
      status.textContent = "Could not save just now (offline?). Your answers stay on this page; they will be sent again.";
    });
  }

  function queue(code, value) {
    if (stopped) { return; }
    pending[code] = value;
    delete failed[code];
    status.textContent = "Saving…";
    if (timer === null) { timer = window.setTimeout(send, windowMs); }
  }

  function valueOf(field) {
    if (field.type === "radio") {
      var checked = form.querySelector("input[name='" + field.name + "']:checked");
      return checked ? checked.value : "";
    }
    return field.value;
  }

  form.addEventListener("change", function (event) {
    var code = codeOf(event.target);
    if (code) { queue(code, valueOf(event.target)); }
  });
  form.addEventListener("input", function (event) {
    var field = event.target, code = codeOf(field);
    if (code && field.type !== "radio") { queue(code, field.value); }
  });
  form.addEventListener("submit", function () {
    stopped = true;  // the form post carries every answer; no autosave may race it
    window.clearTimeout(timer);
    pending = {};
    failed = {};
  });

  function flush() {
    Object.keys(failed).forEach(function (code) { if (!(code in pending)) { pending[code] = failed[code]; } });
    failed = {};
    if (stopped || !Object.keys(pending).length || !navigator.sendBeacon) { return; }
    window.clearTimeout(timer);
    timer = null;
    navigator.sendBeacon(url, payload(pending));
    pending = {};
  }
  window.addEventListener("pagehide", flush);
  document.addEventListener("visibilitychange", function () { if (document.visibilityState === "hidden") { flush(); } });
  // Answers that could not be sent (connection lost) are retried until the server has them.
  window.setInterval(function () {
    var codes = Object.keys(failed);
    if (!codes.length || stopped) { return; }
    codes.forEach(function (code) { if (!(code in pending)) { pending[code] = failed[code]; } });
    failed = {};
    send();
  }, 15000);
})();
