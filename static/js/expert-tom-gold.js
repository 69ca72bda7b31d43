// ToM gold coding page: the score, markers and reason, saved by the shared autosave (expert-autosave.js).
(function () {
  "use strict";
  const form = document.getElementById("tom-form");
  if (!form) return;

  function payload() {
    const score = form.querySelector("input[name=score]:checked");
    return {
      score: score ? score.value : "",
      reason: form.querySelector("textarea[name=reason]").value,
      markers: Array.from(form.querySelectorAll("input[name=markers]:checked")).map((box) => box.value),
    };
  }

  window.expertAutosave(form, payload);
})();
