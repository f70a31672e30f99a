/* Keyboard shortcuts of RealICU Web pages.
   j/k or arrows move the selection in a [data-nav-list] table, Enter opens the
   selected row's data-href, "/" focuses the first [data-filter] field, n/p follow
   [data-page-next]/[data-page-prev], u follows [data-shortcut-up], "[" or Left
   and "]" or Right follow [data-shortcut-prev]/[data-shortcut-next] (previous and
   next window), w follows [data-shortcut-scope], z clicks [data-shortcut-zoom],
   "?" toggles the help panel, Esc closes it or leaves a field; while it is open,
   Page Down / Page Up scroll its list (a long one scrolls within the panel). */
(function () {
  "use strict";

  let selected = -1;

  function rows() {
    const list = document.querySelector("[data-nav-list]");
    // Group heading rows are labels, not items.
    return list ? Array.from(list.querySelectorAll("tbody tr:not(.group-head)")) : [];
  }

  function select(index) {
    const all = rows();
    if (!all.length) return;
    index = Math.max(0, Math.min(all.length - 1, index));
    all.forEach(function (row) {
      row.classList.remove("is-selected");
      row.removeAttribute("aria-selected");
    });
    const row = all[index];
    row.classList.add("is-selected");
    row.setAttribute("aria-selected", "true");
    row.scrollIntoView({ block: "nearest" });
    selected = index;
  }

  function openSelected() {
    const row = rows()[selected];
    if (row && row.dataset.href) {
      window.location.assign(row.dataset.href);
      return true;
    }
    return false;
  }

  function follow(selector) {
    const link = document.querySelector(selector);
    if (link) link.click();
    return Boolean(link);
  }

  function toggleHelp(force) {
    const panel = document.getElementById("shortcut-help");
    if (!panel) return;
    panel.hidden = force === undefined ? !panel.hidden : !force;
  }

  // The open help panel's list, or null.
  function openHelpList() {
    const panel = document.getElementById("shortcut-help");
    return panel && !panel.hidden ? panel.querySelector("dl") : null;
  }

  function isField(el) {
    return el && (el.isContentEditable || /^(INPUT|TEXTAREA|SELECT)$/.test(el.tagName));
  }

  document.addEventListener("keydown", function (event) {
    if (event.ctrlKey || event.metaKey || event.altKey) return;
    const target = event.target;
    if (isField(target)) {
      if (event.key === "Escape") target.blur();
      return;
    }
    const helpList = openHelpList();
    if (helpList && (event.key === "PageDown" || event.key === "PageUp")) {
      const step = helpList.clientHeight * 0.9;
      helpList.scrollBy({ top: event.key === "PageDown" ? step : -step });
      event.preventDefault();
      return;
    }
    switch (event.key) {
      case "j":
      case "ArrowDown":
        if (!rows().length) return;
        select(selected + 1);
        break;
      case "k":
      case "ArrowUp":
        if (!rows().length) return;
        select(selected - 1);
        break;
      case "Enter":
        // A focused link or button handles Enter itself.
        if (target.closest && target.closest("a, button")) return;
        if (!openSelected()) return;
        break;
      case "/": {
        const field = document.querySelector("[data-filter]");
        if (!field) return;
        field.focus();
        break;
      }
      case "n":
        follow("[data-page-next]");
        break;
      case "p":
        follow("[data-page-prev]");
        break;
      case "u":
        follow("[data-shortcut-up]");
        break;
      case "[":
        follow("[data-shortcut-prev]");
        break;
      case "]":
        follow("[data-shortcut-next]");
        break;
      case "ArrowLeft":
        // Left/Right scroll a wide table where there is no window to move to.
        if (!follow("[data-shortcut-prev]")) return;
        break;
      case "ArrowRight":
        if (!follow("[data-shortcut-next]")) return;
        break;
      case "w":
        follow("[data-shortcut-scope]");
        break;
      case "z":
        follow("[data-shortcut-zoom]");
        break;
      case "?":
        toggleHelp();
        break;
      case "Escape":
        toggleHelp(false);
        break;
      default:
        return;
    }
    event.preventDefault();
  });

  document.addEventListener("click", function (event) {
    if (event.target.closest("[data-shortcut-toggle]")) {
      toggleHelp();
      return;
    }
    // A click anywhere on a row opens it, unless it was on a link or control.
    const row = event.target.closest("[data-nav-list] tbody tr[data-href]");
    if (!row || event.target.closest("a, button, input, select")) return;
    window.location.assign(row.dataset.href);
  });

  // A swapped table has new rows: start the selection over.
  document.addEventListener("htmx:afterSettle", function () {
    selected = -1;
  });
})();
