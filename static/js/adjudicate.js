/* Keyboard of the adjudication page (the "?" panel lists the keys): j/k move
   between open disputes, a/e/x pick accept/rewrite/drop for the item in focus,
   1/2/3 settle the status, r/t/D focus a reason field, g recomputes. The
   general keys (], u, ?) are static/js/app.js's. */
(function () {
  "use strict";

  let current = -1;

  function disputes() {
    return Array.from(document.querySelectorAll("#adjudication-workspace [data-dispute]"));
  }

  function isField(el) {
    return el && (el.isContentEditable || /^(INPUT|TEXTAREA|SELECT)$/.test(el.tagName));
  }

  function focusDispute(index) {
    const all = disputes();
    if (!all.length) return null;
    current = Math.max(0, Math.min(all.length - 1, index));
    all.forEach(function (form, n) {
      form.classList.toggle("is-current", n === current);
    });
    all[current].scrollIntoView({ block: "nearest" });
    return all[current];
  }

  function currentDispute(kind) {
    const all = disputes();
    if (kind) {
      const form = all.find(function (f) { return f.dataset.disputeKind === kind; });
      if (form) focusDispute(all.indexOf(form));
      return form || null;
    }
    if (current < 0 || current >= all.length) return focusDispute(0);
    return all[current];
  }

  function pick(form, selector, focusSelector) {
    const input = form && form.querySelector(selector);
    if (!input) return false;
    input.checked = true;
    const field = form.querySelector(focusSelector);
    if (field) {
      field.focus();
      if (field.select) field.select();
    }
    return true;
  }

  document.addEventListener("keydown", function (event) {
    if (event.ctrlKey || event.metaKey || event.altKey) return;
    if (isField(event.target)) return;
    let handled = true;
    switch (event.key) {
      case "j":
        focusDispute(current + 1);
        break;
      case "k":
        focusDispute(current - 1);
        break;
      case "a":
        handled = pick(currentDispute(), "input[data-action-key=a]", "[data-reason]");
        break;
      case "e":
        handled = pick(currentDispute(), "input[data-action-key=e]", "[data-new-text]");
        break;
      case "x":
        handled = pick(currentDispute(), "input[data-action-key=x]", "[data-reason]");
        break;
      case "1":
      case "2":
      case "3":
        handled = pick(currentDispute("status"), "input[data-key='" + event.key + "']", "[data-reason]");
        break;
      case "r": {
        const form = currentDispute();
        const field = form && form.querySelector("[data-reason]");
        if (field) field.focus();
        handled = Boolean(field);
        break;
      }
      case "t": {
        const field = document.querySelector("[data-window-action=third] [data-reason]");
        if (field) field.focus();
        handled = Boolean(field);
        break;
      }
      case "D": {
        const field = document.querySelector("[data-window-action=drop] [data-reason]");
        if (field) field.focus();
        handled = Boolean(field);
        break;
      }
      case "g": {
        const button = document.querySelector("[data-recompute]");
        if (button) button.click();
        handled = Boolean(button);
        break;
      }
      default:
        handled = false;
    }
    if (handled) event.preventDefault();
  });

  // A swapped workspace has other disputes: start from the first again.
  document.addEventListener("htmx:afterSettle", function () {
    current = -1;
  });
})();
