/* Keyboard of the adjudication page (the "?" panel lists the keys): j/k move
   between open disputes, a/e/x pick accept/rewrite/drop for the item in focus,
   1/2/3 settle the status, r/t/D focus a reason field, g recomputes; m opens a
   task's merge panel, where 1-9 choose items by number, w takes the next
   wording of the chosen items, e edits it, r types the reason and Esc leaves.
   The general keys (], u, ?) are static/js/app.js's. */
(function () {
  "use strict";

  let current = -1;
  let merging = null; // the merge panel in focus, if any
  let wordingTurn = -1;

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

  // A reason field the key goes to: focused, if the page has it.
  function focusField(field) {
    if (field) field.focus();
    return Boolean(field);
  }

  function mergePanels() {
    return Array.from(document.querySelectorAll("#adjudication-workspace [data-merge-panel]"));
  }

  function mergeFocus(panel) {
    mergePanels().forEach(function (p) { p.classList.toggle("is-current", p === panel); });
    merging = panel;
    wordingTurn = -1;
    if (panel) panel.scrollIntoView({ block: "nearest" });
  }

  // The wordings of the chosen items, in table order.
  function chosenWordings(panel) {
    const texts = [];
    panel.querySelectorAll("[data-merge-key]:checked").forEach(function (box) {
      box.closest("label").querySelectorAll("[data-wording]").forEach(function (q) {
        if (texts.indexOf(q.textContent) < 0) texts.push(q.textContent);
      });
    });
    return texts;
  }

  function mergeToggle(panel, key) {
    const box = panel.querySelector("input[data-merge-key='" + key + "']");
    if (!box) return false;
    box.checked = !box.checked;
    const field = panel.querySelector("[data-merge-text]");
    const texts = chosenWordings(panel);
    // The first chosen wording is offered until the admin takes or types another.
    if (field && (!field.value || field.dataset.auto === "1")) {
      field.value = texts[0] || "";
      field.dataset.auto = "1";
      wordingTurn = 0;
    }
    return true;
  }

  function mergeNextWording(panel) {
    const field = panel.querySelector("[data-merge-text]");
    const texts = chosenWordings(panel);
    if (!field || !texts.length) return false;
    wordingTurn = (wordingTurn + 1) % texts.length;
    field.value = texts[wordingTurn];
    field.dataset.auto = "0";
    return true;
  }

  function mergeKey(event) {
    const panel = merging;
    switch (event.key) {
      case "Escape":
        mergeFocus(null);
        return true;
      case "w":
        return mergeNextWording(panel);
      case "e": {
        const field = panel.querySelector("[data-merge-text]");
        field.dataset.auto = "0";
        field.focus();
        field.select();
        return true;
      }
      case "r":
        panel.querySelector("[data-reason]").focus();
        return true;
      default:
        if (/^[1-9]$/.test(event.key)) return mergeToggle(panel, event.key);
        return null; // not a merge key: the page's keys apply
    }
  }

  document.addEventListener("input", function (event) {
    if (event.target.matches && event.target.matches("[data-merge-text]")) {
      event.target.dataset.auto = "0";
    }
  });

  document.addEventListener("keydown", function (event) {
    if (event.ctrlKey || event.metaKey || event.altKey) return;
    if (isField(event.target)) return;
    if (merging && !document.contains(merging)) mergeFocus(null);
    if (event.key === "m") {
      const panels = mergePanels();
      if (!panels.length) return;
      mergeFocus(panels[(panels.indexOf(merging) + 1) % panels.length]);
      event.preventDefault();
      return;
    }
    if (merging) {
      const done = mergeKey(event);
      if (done !== null) {
        if (done) event.preventDefault();
        return;
      }
    }
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
        handled = focusField(form && form.querySelector("[data-reason]"));
        break;
      }
      case "t":
        handled = focusField(document.querySelector("[data-window-action=third] [data-reason]"));
        break;
      case "D":
        handled = focusField(document.querySelector("[data-window-action=drop] [data-reason]"));
        break;
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
    merging = null;
    // A refused merge comes back with its panel filled in: keep it in focus.
    const refused = document.querySelector("[data-error]") &&
      mergePanels().find(function (p) { return p.querySelector("[data-merge-key]:checked"); });
    if (refused) mergeFocus(refused);
  });
})();
