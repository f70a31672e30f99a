/* Keyboard of the calibration page: S judges the pair "same", D "different"
   (either case). */
(function () {
  "use strict";
  document.addEventListener("keydown", function (event) {
    if (event.ctrlKey || event.metaKey || event.altKey) return;
    const target = event.target;
    if (target && /^(INPUT|TEXTAREA|SELECT)$/.test(target.tagName)) return;
    const key = event.key.toLowerCase();
    const value = key === "s" ? "same" : key === "d" ? "different" : null;
    if (!value) return;
    const button = document.querySelector("#judge-pair [data-judge='" + value + "']");
    if (!button || button.disabled) return;
    event.preventDefault();
    button.click();
  });
})();
