/* The physician's pages.
   Queue: "n" opens the next unfinished window ([data-next-assignment]).
   Annotation page ([data-label-form]): the form is the label; every change
   (typing, a status, a rating, a cited event) is posted as one JSON payload to
   the draft endpoint 800 ms after the last change, with the version it was based
   on, and the answer's version becomes the next base. A refused save (another
   tab saved first) stops autosave and says so: nothing is overwritten. Evidence:
   clicking an event row (tr[data-event-id]) or pressing "e" on the selected one,
   or clicking a point of a plot (or Enter on a focused plot: trajectory.js's
   "trajectory:cite"), cites the event on the item in focus; so does the finder
   ("c", or by itself after a new item that still needs evidence): typing words
   such as "spo2 88" keeps the events shown whose name, category, kind or value
   has words starting so, the window's own rows first, and Enter cites the
   highlighted one. "g" jumps to the window's own rows of the next domain group.
   A new text item is left out of the label until it is done (Enter, or leaving
   it with text): Esc abandons it unsaved. "x" removes the item in focus, Ctrl+Z
   brings it back. Keys are listed in the "?" panel. */
(function () {
  "use strict";

  const SAVE_DELAY_MS = 800;
  const FINDER_RESULTS = 8;
  // How a submit's messages name an item (evaluation.labelschema.TEXT_LISTS).
  const ITEM_NOUNS = {
    acute_problems: "Acute problem",
    added_actions: "Added action",
    red_flags: "Red flag",
  };
  const IDLE_AFTER_MS = 60000; // no key or pointer for a minute: not working

  function isTextField(el) {
    if (!el) return false;
    if (el.isContentEditable || /^(TEXTAREA|SELECT)$/.test(el.tagName)) return true;
    return el.tagName === "INPUT" && !/^(radio|checkbox|button|submit)$/.test(el.type);
  }

  const form = document.querySelector("[data-label-form]");

  if (!form) {
    // The queue.
    document.addEventListener("keydown", function (event) {
      if (event.ctrlKey || event.metaKey || event.altKey || isTextField(event.target)) return;
      if (event.key !== "n") return;
      const link = document.querySelector("[data-next-assignment]");
      if (!link) return;
      event.preventDefault();
      link.click();
    });
    return;
  }

  const readonly = form.hasAttribute("data-readonly");
  // The campaign's setting: each acute problem, added action and red flag cites
  // at least one event before the label can be submitted.
  const evidenceRequired = form.hasAttribute("data-evidence-required");
  const statusBox = form.querySelector("[data-save-status]");
  const versionShown = form.querySelector("[data-version-shown]");
  const conflictBox = form.querySelector("[data-conflict]");
  const submitButton = form.querySelector("[data-submit]");
  let version = parseInt(form.dataset.version, 10) || 0;
  let active = null; // the item in focus: evidence goes there
  let abandoning = null; // the pending item being dropped (its blur is no commit)
  let removed = null; // the last removed item, for Ctrl+Z: {item, parent, next}
  const editStart = new WeakMap(); // a text item's text when its field got focus
  let timer = null;
  let inFlight = null; // the pending save's promise
  let dirty = false;
  let stopped = false; // after a conflict: nothing more is sent
  let activeSeconds = 0;
  let sendingSeconds = 0; // the part of activeSeconds the pending save carries
  let lastActivity = Date.now();
  // Seconds of work a previous visit of this page did not get to send.
  const secondsKey = "realicu:active-seconds:" + form.dataset.draftUrl;
  try {
    if (!readonly) activeSeconds = parseInt(window.localStorage.getItem(secondsKey), 10) || 0;
    window.localStorage.removeItem(secondsKey);
  } catch (e) {
    activeSeconds = 0;
  }

  function csrfToken() {
    try {
      return JSON.parse(document.body.getAttribute("hx-headers"))["X-CSRFToken"];
    } catch (e) {
      return "";
    }
  }

  // The label ------------------------------------------------------------------

  function chipIds(item) {
    return Array.from(item.querySelectorAll(":scope > [data-chips] [data-evidence-id]")).map(
      function (chip) { return parseInt(chip.dataset.evidenceId, 10); }
    );
  }

  function listItems(list) {
    return Array.from(list.querySelectorAll(":scope > [data-items] > [data-item]"));
  }

  function checked(container, name) {
    const input = container.querySelector('input[type=radio][name="' + name + '"]:checked');
    return input ? input.value : "";
  }

  function payload() {
    const statusItem = form.querySelector("[data-status-item]");
    const body = {
      status: checked(form, "status"),
      status_evidence: chipIds(statusItem),
      // An action neither rated nor cited is left out: a submit then names it.
      action_ratings: Array.from(form.querySelectorAll("[data-action-id]")).map(function (item) {
        const id = item.dataset.actionId;
        return { event_id: parseInt(id, 10), rating: checked(item, "rating-" + id), evidence: chipIds(item) };
      }).filter(function (r) { return r.rating || r.evidence.length; }),
    };
    form.querySelectorAll("[data-list]").forEach(function (list) {
      body[list.dataset.list] = listItems(list).filter(function (item) {
        return !item.hasAttribute("data-pending");
      }).map(
        function (item) {
          return { text: item.querySelector("[data-text]").value, evidence: chipIds(item) };
        }
      );
    });
    return body;
  }

  function formData(extra) {
    const data = new URLSearchParams();
    data.set("payload", JSON.stringify(payload()));
    data.set("base_version", String(version));
    data.set("active_seconds", String(activeSeconds));
    Object.keys(extra || {}).forEach(function (k) { data.set(k, extra[k]); });
    return data;
  }

  // Messages -------------------------------------------------------------------

  function setState(state, text) {
    form.dataset.saveState = state;
    if (text !== undefined) statusBox.textContent = text;
  }

  function clearErrors() {
    form.querySelectorAll("[data-errors-for]").forEach(function (box) {
      box.textContent = "";
      if (box.dataset.errorsFor === "__all__") box.hidden = true;
    });
    form.querySelectorAll(".has-error").forEach(function (n) { n.classList.remove("has-error"); });
  }

  function showErrors(errors, message) {
    clearErrors();
    Object.keys(errors || {}).forEach(function (field) {
      const box = form.querySelector('[data-errors-for="' + field + '"]') ||
        form.querySelector('[data-errors-for="__all__"]');
      errors[field].forEach(function (text) {
        const li = document.createElement(box.tagName === "UL" ? "li" : "p");
        li.className = "field-error";
        li.textContent = text;
        box.appendChild(li);
      });
      box.hidden = false;
      const task = box.closest("fieldset");
      if (task) task.classList.add("has-error");
    });
    if (message) {
      const top = form.querySelector('[data-errors-for="__all__"]');
      const p = document.createElement("p");
      p.textContent = message;
      top.insertBefore(p, top.firstChild);
      top.hidden = false;
    }
  }

  function showConflict(message) {
    stopped = true;
    clearTimeout(timer);
    conflictBox.textContent = "";
    const p = document.createElement("p");
    p.textContent = message + " Your changes on this page were not saved.";
    const reload = document.createElement("a");
    reload.href = window.location.pathname;
    reload.className = "button button-small";
    reload.textContent = "Reload the saved label";
    conflictBox.append(p, reload);
    conflictBox.hidden = false;
    if (submitButton) submitButton.disabled = true;
    setState("conflict", "Not saved: changed elsewhere");
  }

  // Saving ---------------------------------------------------------------------

  function changed() {
    if (readonly || stopped) return;
    dirty = true;
    setState("dirty", "Unsaved changes…");
    clearTimeout(timer);
    timer = setTimeout(save, SAVE_DELAY_MS);
  }

  function post(url, data) {
    return fetch(url, {
      method: "POST",
      body: data,
      credentials: "same-origin",
      headers: { "X-CSRFToken": csrfToken(), "HX-Request": "true", Accept: "application/json" },
    }).then(function (response) {
      return response.json().catch(function () {
        return { ok: false, message: "The server answered " + response.status + "; your work is still on this page." };
      }).then(function (body) {
        body.status = response.status;
        body.redirectTo = response.headers.get("HX-Redirect") || body.redirect;
        return body;
      });
    });
  }

  function save() {
    clearTimeout(timer);
    if (stopped || readonly) return Promise.resolve();
    if (inFlight) {
      // One save at a time: the next starts from the version this one returns.
      return inFlight.then(function () { return dirty ? save() : undefined; });
    }
    if (!dirty) return Promise.resolve();
    dirty = false;
    const sentSeconds = activeSeconds;
    sendingSeconds = sentSeconds;
    setState("saving", "Saving…");
    inFlight = post(form.dataset.draftUrl, formData())
      .then(function (body) {
        if (body.ok) {
          version = body.version;
          form.dataset.version = String(version);
          versionShown.textContent = String(version);
          activeSeconds = Math.max(0, activeSeconds - sentSeconds);
          clearErrors();
          if (!dirty) setState("saved", "Saved " + body.saved_at);
        } else if (body.status === 409) {
          showConflict(body.message);
        } else {
          showErrors(body.errors, body.message);
          setState("error", "Not saved: see the messages");
        }
      })
      .catch(function () {
        dirty = true;
        setState("error", "Not saved: no connection. Retrying…");
        timer = setTimeout(save, 5000);
      })
      .finally(function () {
        inFlight = null;
        sendingSeconds = 0;
      });
    return inFlight.then(function () { return dirty && !stopped ? save() : undefined; });
  }

  let submitting = false;

  // Items a submit refuses for want of evidence (the campaign's setting), by
  // list, in the words of annotation.services.labels.
  function evidenceErrors() {
    const errors = {};
    if (!evidenceRequired) return errors;
    form.querySelectorAll("[data-list]").forEach(function (list) {
      listItems(list).forEach(function (item) {
        const text = item.querySelector("[data-text]").value.trim();
        const missing = Boolean(text) && !chipIds(item).length;
        item.classList.toggle("needs-evidence", missing);
        if (!missing) return;
        const field = list.dataset.list;
        (errors[field] = errors[field] || []).push(
          ITEM_NOUNS[field] + ' "' + text + '" has no evidence event; cite at least ' +
          "one (campaign setting)."
        );
      });
    });
    return errors;
  }

  function submit() {
    if (readonly || stopped || submitting) return;
    // Items still being typed count as done; blank new ones are dropped.
    form.querySelectorAll("[data-item][data-pending]").forEach(function (item) {
      if (!commitItem(item)) abandonItem(item);
    });
    const missing = evidenceErrors();
    if (Object.keys(missing).length) {
      showErrors(missing);
      setState("error", "Not submitted: see the messages");
      return;
    }
    submitting = true;
    if (submitButton) submitButton.disabled = true;
    clearTimeout(timer);
    setState("submitting", "Submitting…");
    const waitFor = inFlight || Promise.resolve();
    waitFor
      .then(function () {
        if (stopped) return null;
        return post(form.dataset.submitUrl, formData({ submission_id: form.dataset.submissionId }));
      })
      .then(function (body) {
        if (!body) return;
        if (body.ok) {
          dirty = false;
          setState("submitted", "Submitted");
          window.location.assign(body.redirectTo);
          return;
        }
        if (body.status === 409) {
          showConflict(body.message);
        } else {
          showErrors(body.errors, body.message);
          setState("error", "Not submitted: see the messages");
        }
      })
      .catch(function () {
        setState("error", "Not submitted: no connection. Your work is still here.");
      })
      .finally(function () {
        submitting = false;
        if (submitButton && !stopped) submitButton.disabled = false;
      });
  }

  // Items and evidence ---------------------------------------------------------

  function highlightEvidence() {
    const ids = active ? chipIds(active).map(String) : [];
    document.querySelectorAll("tr[data-event-id]").forEach(function (row) {
      row.classList.toggle("is-evidence", ids.indexOf(row.dataset.eventId) !== -1);
    });
  }

  function activate(item, focus) {
    if (!item) return;
    if (active) active.classList.remove("is-active");
    active = item;
    item.classList.add("is-active");
    if (focus) {
      item.focus({ preventScroll: true });
      item.scrollIntoView({ block: "nearest" });
    }
    highlightEvidence();
  }

  // A chip's name: the event's concept and hour, as the server names the
  // chips of a saved label (annotation.views._event_label), so a chip keeps its
  // name after a reload.
  function eventLabel(row) {
    const cells = row.querySelectorAll("td");
    const cell = row.querySelector("[data-event-name]");
    const name = cell ? cell.dataset.eventName :
      cells[4] ? cells[4].textContent.trim() : "Event " + row.dataset.eventId;
    const hours = cells[0] ? parseFloat(cells[0].textContent) : NaN;
    return isNaN(hours) ? name : name + " · " + hours.toFixed(1) + " h";
  }

  function cite(row) {
    if (!row) return;
    citeEvent(row.dataset.eventId, eventLabel(row));
  }

  // Attach event ``id`` (a string) to the item in focus, shown as ``label``.
  function citeEvent(id, label) {
    if (readonly || !id) return;
    if (!active) {
      flash("Choose an item first (click it, or add one), then click the event.");
      return;
    }
    const chips = active.querySelector(":scope > [data-chips]");
    if (chips.querySelector('[data-evidence-id="' + id + '"]')) return;
    const chip = document.createElement("button");
    chip.type = "button";
    chip.className = "chip";
    chip.dataset.evidenceId = id;
    chip.title = "Evidence: remove it";
    chip.textContent = label + " ";
    const x = document.createElement("span");
    x.setAttribute("aria-hidden", "true");
    x.textContent = "×";
    chip.appendChild(x);
    chips.appendChild(chip);
    highlightEvidence();
    changed();
  }

  // A passing word to the physician (a removal's undo, a finder's miss), apart
  // from the save status.
  const noticeBox = form.querySelector("[data-notice]");
  function flash(text) {
    if (!noticeBox) {
      setState(form.dataset.saveState, text);
      return;
    }
    noticeBox.textContent = text;
    noticeBox.hidden = !text;
  }

  function itemName(item) {
    if (item.hasAttribute("data-status-item")) return "the patient status";
    if (item.hasAttribute("data-action-id")) {
      const name = item.querySelector(".action-name");
      return "the rating of " + (name ? name.textContent.replace(/\s+/g, " ").trim() : "the action");
    }
    const list = item.closest("[data-list]");
    const text = item.querySelector("[data-text]").value.trim();
    return ITEM_NOUNS[list.dataset.list].toLowerCase() + (text ? ' "' + text + '"' : "");
  }

  // The event table's rows ----------------------------------------------------

  function eventRows() {
    return Array.from(document.querySelectorAll("#window-events tbody tr[data-event-id]"));
  }

  function selectedRow(rows) {
    return rows.findIndex(function (row) { return row.classList.contains("is-selected"); });
  }

  // The same selection app.js's j/k make, so "e" cites it.
  function selectRow(rows, index, block) {
    rows.forEach(function (row) {
      row.classList.remove("is-selected");
      row.removeAttribute("aria-selected");
    });
    const row = rows[index];
    if (!row) return;
    row.classList.add("is-selected");
    row.setAttribute("aria-selected", "true");
    row.scrollIntoView({ block: block || "nearest" });
  }

  // The window's own rows close each domain group (the table is in time
  // order): "g" selects the first of them in the next group, round again at
  // the end.
  function jumpToWindowRows() {
    const rows = eventRows();
    const starts = [];
    rows.forEach(function (row, i) {
      if (!row.classList.contains("pos-in")) return;
      const before = rows[i - 1];
      if (!before || before.parentNode !== row.parentNode || !before.classList.contains("pos-in")) {
        starts.push(i);
      }
    });
    if (!starts.length) {
      flash("No event of this page lies in the window.");
      return;
    }
    const current = selectedRow(rows);
    const next = starts.find(function (i) { return i > current; });
    selectRow(rows, next === undefined ? starts[0] : next, "center");
  }

  // The finder ------------------------------------------------------------------

  const finder = document.querySelector("[data-event-finder]");
  const finderInput = finder && finder.querySelector("[data-finder-input]");
  const finderList = finder && finder.querySelector("[data-finder-results]");
  const finderTarget = finder && finder.querySelector("[data-finder-target]");
  const finderCount = finder && finder.querySelector("[data-finder-count]");
  const POSITION_RANKS = [["pos-in", 0, "window"], ["pos-before", 1, "look-back"], ["pos-after", 2, "after"]];
  let finderRows = [];
  let finderMatches = [];
  let finderAt = 0;

  function wordsOf(text) {
    return text.toLowerCase().split(/[^a-z0-9.]+/).filter(Boolean);
  }

  // What the finder knows of a row: the words of its kind, category, name (and
  // source label) and value; where it lies; its hour.
  function finderEntry(row) {
    const cells = row.querySelectorAll("td");
    const text = function (i) { return cells[i] ? cells[i].textContent : ""; };
    const position = POSITION_RANKS.find(function (p) { return row.classList.contains(p[0]); }) ||
      ["", 3, ""];
    const title = cells[4] ? cells[4].getAttribute("title") || "" : "";
    return {
      row: row,
      words: wordsOf([text(2), text(3), text(4), title, text(5)].join(" ")),
      rank: position[1],
      where: position[2],
      hours: parseFloat(text(0)),
      name: text(4).replace(/\s+/g, " ").trim(),
      value: text(5).trim(),
    };
  }

  function findRun() {
    const query = wordsOf(finderInput.value);
    finderMatches = finderRows.filter(function (entry) {
      return query.every(function (q) {
        return entry.words.some(function (w) { return w.startsWith(q); });
      });
    }).sort(function (a, b) {
      // The window's rows first, the latest first within each part.
      return a.rank - b.rank || (b.hours || 0) - (a.hours || 0);
    });
    finderAt = 0;
    finderShow();
  }

  function finderShow() {
    finderList.textContent = "";
    finderMatches.slice(0, FINDER_RESULTS).forEach(function (entry, i) {
      const li = document.createElement("li");
      li.setAttribute("role", "option");
      li.dataset.finderIndex = String(i);
      li.dataset.eventId = entry.row.dataset.eventId;
      li.classList.toggle("is-highlighted", i === finderAt);
      li.setAttribute("aria-selected", i === finderAt ? "true" : "false");
      const name = document.createElement("span");
      name.className = "finder-name";
      name.textContent = entry.name;
      const value = document.createElement("span");
      value.className = "finder-value mono";
      value.textContent = entry.value === "–" ? "" : entry.value;
      const when = document.createElement("span");
      when.className = "muted small";
      when.textContent = (isNaN(entry.hours) ? "" : entry.hours.toFixed(2) + " h · ") + entry.where;
      li.append(name, " ", value, " ", when);
      finderList.appendChild(li);
    });
    const n = finderMatches.length;
    finderCount.textContent = n ? (n > FINDER_RESULTS ? FINDER_RESULTS + " of " : "") + n +
      " event" + (n === 1 ? "" : "s") : "No event shown matches";
    document.querySelectorAll("#window-events tr.is-found").forEach(function (row) {
      row.classList.remove("is-found");
    });
    const entry = finderMatches[finderAt];
    if (entry) {
      entry.row.classList.add("is-found");
      entry.row.scrollIntoView({ block: "nearest" });
    }
  }

  function finderMove(step) {
    const last = Math.min(finderMatches.length, FINDER_RESULTS) - 1;
    if (last < 0) return;
    finderAt = Math.max(0, Math.min(last, finderAt + step));
    finderShow();
  }

  function openFinder() {
    if (!finder || readonly) return;
    if (!active || !active.isConnected) {
      flash("Choose an item first (click it, or add one), then find the event.");
      return;
    }
    flash("");
    finderRows = eventRows().map(finderEntry);
    finderTarget.textContent = itemName(active);
    finderInput.value = "";
    finder.hidden = false;
    finderInput.focus();
    findRun();
  }

  function closeFinder(refocus) {
    if (!finder || finder.hidden) return;
    finder.hidden = true;
    document.querySelectorAll("#window-events tr.is-found").forEach(function (row) {
      row.classList.remove("is-found");
    });
    if (refocus && active && active.isConnected) activate(active, true);
  }

  function finderCite(index) {
    const entry = finderMatches[index];
    if (!entry) {
      flash("No event shown matches \u201c" + finderInput.value.trim() + "\u201d; try fewer or other words.");
      return;
    }
    const rows = eventRows();
    selectRow(rows, rows.indexOf(entry.row));
    cite(entry.row);
    closeFinder(true);
  }

  // A new item is pending (left out of the label) until it is done.
  function addItem(field) {
    const list = form.querySelector('[data-list="' + field + '"]');
    if (!list || readonly) return;
    const template = list.querySelector("[data-item-template]");
    const item = template.content.firstElementChild.cloneNode(true);
    item.setAttribute("data-pending", "");
    list.querySelector("[data-items]").appendChild(item);
    if (window.htmx) window.htmx.process(item);
    activate(item, false);
    item.querySelector("[data-text]").focus();
  }

  // A pending item with text joins the label; true when the item is (now) part
  // of it.
  function commitItem(item) {
    if (!item.hasAttribute("data-pending")) return true;
    if (!item.querySelector("[data-text]").value.trim()) return false;
    item.removeAttribute("data-pending");
    changed();
    return true;
  }

  // A pending item goes without a trace: it was never part of the label.
  function abandonItem(item) {
    abandoning = item;
    if (item === active) active = null;
    item.remove();
    abandoning = null;
    highlightEvidence();
  }

  // Remove an item of the label; Ctrl+Z puts it back where it was.
  function removeItem(item) {
    if (item.hasAttribute("data-pending")) {
      abandonItem(item);
      return;
    }
    const list = item.closest("[data-list]");
    const text = item.querySelector("[data-text]").value.trim();
    removed = { item: item, parent: item.parentNode, next: item.nextElementSibling };
    const neighbour = item.nextElementSibling || item.previousElementSibling;
    if (item === active) active = null;
    item.remove();
    if (neighbour) activate(neighbour, true);
    highlightEvidence();
    changed();
    flash("Removed " + ITEM_NOUNS[list.dataset.list].toLowerCase() +
      (text ? ' "' + text + '"' : "") + ": Ctrl+Z brings it back.");
  }

  function undoRemove() {
    if (!removed || !removed.parent.isConnected) return false;
    const next = removed.next && removed.next.parentNode === removed.parent ? removed.next : null;
    removed.parent.insertBefore(removed.item, next);
    const item = removed.item;
    removed = null;
    flash("");
    activate(item, true);
    changed();
    return true;
  }

  function statusSet(value) {
    const input = form.querySelector('input[name="status"][value="' + value + '"]');
    if (!input || input.disabled) return;
    input.checked = true;
    activate(form.querySelector("[data-status-item]"), true);
    changed();
  }

  function actionItems() {
    return Array.from(form.querySelectorAll("[data-action-id]"));
  }

  function nextUnrated(after) {
    const items = actionItems();
    const start = after ? items.indexOf(after) + 1 : 0;
    const ordered = items.slice(start).concat(items.slice(0, start));
    return ordered.find(function (item) {
      return !checked(item, "rating-" + item.dataset.actionId);
    });
  }

  function rate(index) {
    let item = active && active.hasAttribute("data-action-id") ? active : nextUnrated(null);
    if (!item) return;
    const inputs = item.querySelectorAll("input[type=radio]");
    if (!inputs[index] || inputs[index].disabled) return;
    inputs[index].checked = true;
    changed();
    // On to the next action to rate; stay when all are rated.
    activate(nextUnrated(item) || item, true);
  }

  form.addEventListener("submit", function (event) { event.preventDefault(); });

  if (!readonly) {
    // Typing in a new item is not saved until the item is done.
    ["input", "change"].forEach(function (type) {
      form.addEventListener(type, function (event) {
        const item = event.target.closest("[data-item]");
        if (item && item.hasAttribute("data-pending")) return;
        changed();
      });
    });
    form.addEventListener("focusin", function (event) {
      const item = event.target.closest("[data-item]");
      if (item) activate(item, false);
      if (event.target.matches("[data-text]")) editStart.set(event.target, event.target.value);
    });
    // Leaving a new item with text in it (to click an event, say): it is done.
    form.addEventListener("focusout", function (event) {
      const item = event.target.closest("[data-item][data-pending]");
      if (!item || item === abandoning || !event.target.matches("[data-text]")) return;
      if (event.relatedTarget && item.contains(event.relatedTarget)) return;
      commitItem(item);
    });
    form.addEventListener("click", function (event) {
      const chip = event.target.closest("[data-evidence-id]");
      if (chip && form.contains(chip)) {
        chip.remove();
        highlightEvidence();
        changed();
        return;
      }
      const remove = event.target.closest("[data-remove-item]");
      if (remove) {
        removeItem(remove.closest("[data-item]"));
        return;
      }
      const add = event.target.closest("[data-add-item]");
      if (add) {
        addItem(add.closest("[data-list]").dataset.list);
        return;
      }
      if (event.target.closest("[data-submit]")) {
        submit();
        return;
      }
      const item = event.target.closest("[data-item]");
      if (item) activate(item, false);
    });
    form.addEventListener("keydown", function (event) {
      if (!event.target.matches("[data-text]") || event.ctrlKey || event.metaKey) return;
      const field = event.target;
      const item = field.closest("[data-item]");
      if (event.key === "Enter") {
        // Done with it: the item stays in focus for evidence, and when the
        // campaign needs evidence the finder opens for it.
        event.preventDefault();
        if (!commitItem(item)) {
          abandonItem(item);
          return;
        }
        field.blur();
        activate(item, true);
        if (evidenceRequired && !chipIds(item).length) openFinder();
      } else if (event.key === "Escape") {
        // Abandon: a new item goes unsaved, an emptied one is removed, an
        // edited one gets its text back.
        event.preventDefault();
        event.stopPropagation();
        if (item.hasAttribute("data-pending")) {
          abandonItem(item);
          flash("New item dropped: nothing of it was saved.");
        } else if (!field.value.trim()) {
          removeItem(item);
        } else {
          const before = editStart.get(field);
          if (before !== undefined && before !== field.value) {
            field.value = before;
            changed();
          }
          field.blur();
          activate(item, true);
        }
      }
    });
    if (finder) {
      finderInput.addEventListener("input", findRun);
      finderInput.addEventListener("keydown", function (event) {
        if (event.ctrlKey || event.metaKey || event.altKey) {
          // Ctrl+Enter submits (the document's handler): the finder closes first.
          if (event.key === "Enter") closeFinder(false);
          return;
        }
        switch (event.key) {
          case "ArrowDown": finderMove(1); break;
          case "ArrowUp": finderMove(-1); break;
          case "Enter": finderCite(finderAt); break;
          case "Escape":
            event.stopPropagation();
            closeFinder(true);
            // Closed without a citation: say what the submit will ask.
            if (evidenceRequired && active && active.closest("[data-list]") && !chipIds(active).length) {
              flash(itemName(active).replace(/^./, function (ch) { return ch.toUpperCase(); }) +
                " has no evidence event yet; press c to cite one before submitting.");
            }
            break;
          default:
            return;
        }
        event.preventDefault();
      });
      finderInput.addEventListener("focusout", function (event) {
        if (!event.relatedTarget || !finder.contains(event.relatedTarget)) closeFinder(false);
      });
      // A click on a match cites it; the input keeps the focus until then.
      finderList.addEventListener("mousedown", function (event) { event.preventDefault(); });
      finderList.addEventListener("click", function (event) {
        const li = event.target.closest("[data-finder-index]");
        if (li) finderCite(parseInt(li.dataset.finderIndex, 10));
      });
    }
    // j/k from the selection this page made ("g", the finder): app.js keeps its
    // own count, which a jump or an htmx swap leaves behind.
    window.addEventListener("keydown", function (event) {
      if (event.ctrlKey || event.metaKey || event.altKey) return;
      const target = event.target;
      if (isTextField(target) || (target.closest && target.closest("input, [data-trajectory]"))) return;
      let step = 0;
      if (event.key === "j" || event.key === "ArrowDown") step = 1;
      else if (event.key === "k" || event.key === "ArrowUp") step = -1;
      else return;
      const rows = eventRows();
      const current = selectedRow(rows);
      if (current === -1) return;
      event.preventDefault();
      event.stopPropagation();
      selectRow(rows, Math.max(0, Math.min(rows.length - 1, current + step)));
    }, true);
    // Rows are swapped by htmx when the table pages: listen on the document.
    document.addEventListener("click", function (event) {
      const row = event.target.closest("#window-events tr[data-event-id]");
      if (!row || event.target.closest("a, button, input, select")) return;
      cite(row);
    });
    document.addEventListener("htmx:afterSettle", highlightEvidence);
    // A point of a plot (trajectory.js): the event behind it.
    document.addEventListener("trajectory:cite", function (event) {
      const id = event.detail && event.detail.eventId;
      if (id === null || id === undefined) return;
      // The event's row, when the table shows it, names it as a reload will.
      const row = document.querySelector('tr[data-event-id="' + String(id) + '"]');
      citeEvent(String(id), row ? eventLabel(row) : event.detail.label);
    });
  }

  document.addEventListener("keydown", function (event) {
    lastActivity = Date.now();
    if (readonly) return;
    if ((event.ctrlKey || event.metaKey) && event.key === "Enter") {
      event.preventDefault();
      submit();
      return;
    }
    if (isTextField(event.target)) return;
    if ((event.ctrlKey || event.metaKey) && (event.key === "z" || event.key === "Z")) {
      if (undoRemove()) event.preventDefault();
      return;
    }
    if (event.ctrlKey || event.metaKey || event.altKey) return;
    switch (event.key) {
      case "1": statusSet("improving"); break;
      case "2": statusSet("stable"); break;
      case "3": statusSet("deteriorating"); break;
      case "4": rate(0); break;
      case "5": rate(1); break;
      case "6": rate(2); break;
      case "a": addItem("acute_problems"); break;
      case "d": addItem("added_actions"); break;
      case "f": addItem("red_flags"); break;
      case "r": {
        const item = nextUnrated(active && active.hasAttribute("data-action-id") ? active : null);
        if (!item) return;
        activate(item, true);
        break;
      }
      case "e":
        cite(document.querySelector("#window-events tr.is-selected[data-event-id]"));
        break;
      case "c": openFinder(); break;
      case "g": jumpToWindowRows(); break;
      case "x":
      case "Delete":
        if (!active || !active.closest("[data-list]")) {
          flash("x removes an acute problem, added action or red flag: choose one first.");
          break;
        }
        removeItem(active);
        break;
      default:
        return;
    }
    event.preventDefault();
  });

  // Time on task: seconds with a key or pointer in the last minute.
  ["pointerdown", "pointermove", "wheel"].forEach(function (type) {
    document.addEventListener(type, function () { lastActivity = Date.now(); }, { passive: true });
  });
  setInterval(function () {
    if (!document.hidden && Date.now() - lastActivity < IDLE_AFTER_MS) activeSeconds += 1;
  }, 1000);

  // Leaving with changes not yet sent: send them now (the tab may be closing).
  // Seconds of work not yet sent with a save are kept in the browser and go
  // with the next save of this label, after a reload or in a later visit: time
  // on task survives a reload without a save of its own (which would race the
  // reloaded page for the label's version).
  window.addEventListener("pagehide", function () {
    if (readonly || stopped) return;
    const unsent = activeSeconds - sendingSeconds;
    if (unsent >= 1 && !(dirty && !inFlight)) {
      try {
        const kept = parseInt(window.localStorage.getItem(secondsKey), 10) || 0;
        window.localStorage.setItem(secondsKey, String(kept + unsent));
      } catch (e) {
        // Storage refused (private mode, quota): those seconds are not counted.
      }
    }
    if (!dirty || inFlight) return;
    const data = formData({ csrfmiddlewaretoken: csrfToken() });
    if (navigator.sendBeacon) navigator.sendBeacon(form.dataset.draftUrl, data);
  });
})();
