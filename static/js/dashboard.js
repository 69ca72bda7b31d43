/* Staff dashboard: poll background jobs and move their progress bars; no dependencies, no CDN. */
(function () {
  "use strict";
  var INTERVAL_MS = 1500;

  function describe(data) {
    var label = { queued: "Queued", running: "Running", done: "Done", failed: "Failed" }[data.status] || data.status;
    return label + " · " + data.percent + "%";
  }

  function watch(box) {
    var url = box.getAttribute("data-status-url");
    var bar = box.querySelector("progress");
    var text = box.querySelector(".dash-job-text");
    var timer = null;

    function finish(data) {
      // A finished row must not keep saying "Preparing": relabel it and drop the bar.
      var caption = box.querySelector("label");
      if (caption) { caption.textContent = data.status === "failed" ? "Failed" : "Finished"; }
      bar.hidden = true;
      if (data.status === "failed") {
        text.textContent = "Failed: " + (data.error || "see the job record");
        return;
      }
      if (box.hasAttribute("data-reload")) {
        window.location.reload();
        return;
      }
      if (data.download_url) {
        var link = document.createElement("a");
        link.href = data.download_url;
        link.className = "button";
        link.textContent = "Download";
        text.textContent = "Ready ";
        text.appendChild(link);
      }
    }

    function poll() {
      fetch(url, { credentials: "same-origin", headers: { Accept: "application/json" } })
        .then(function (response) {
          if (!response.ok || (response.headers.get("Content-Type") || "").indexOf("json") === -1) {
            throw new Error("status " + response.status);
          }
          return response.json();
        })
        .then(function (data) {
          bar.max = Math.max(data.total, 1);
          bar.value = data.status === "done" ? bar.max : data.done;
          bar.textContent = data.percent + "%";
          text.textContent = describe(data);
          if (data.status === "done" || data.status === "failed") {
            finish(data);
          } else {
            timer = window.setTimeout(poll, INTERVAL_MS);
          }
        })
        .catch(function () {
          text.textContent = "Lost contact with the server; reload the page to check again.";
          if (timer) { window.clearTimeout(timer); }
        });
    }
    poll();
  }

  document.addEventListener("DOMContentLoaded", function () {
    Array.prototype.forEach.call(document.querySelectorAll(".dash-job[data-status-url]"), watch);
  });
})();
