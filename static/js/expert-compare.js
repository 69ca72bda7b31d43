// Comparison page: the ranking and acceptability drafts, saved by the shared autosave (expert-autosave.js).
(function () {
  "use strict";
  const form = document.getElementById("compare-form");
  if (!form) return;

  function payload() {
    const placements = {};
    form.querySelectorAll("fieldset.placement").forEach((box) => {
      const position = box.dataset.position;
      const checked = box.querySelector(`input[name=accept_${position}]:checked`);
      placements[position] = {
        rank: box.querySelector("select.rank").value,
        acceptability: checked ? checked.value : "",
      };
    });
    return { placements, justification: form.querySelector("textarea[name=justification]").value };
  }

  window.expertAutosave(form, payload);
})();
