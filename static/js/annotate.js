/* The physician's pages.
   Queue: "n" opens the next unfinished window ([data-next-assignment]).
   Annotation page ([data-label-form]): the form is the label; every change
   (typing, a status, a rating, a cited event) is posted as one JSON payload to
   the draft endpoint 800 ms after the last change, with the version it was based
   on, and the answer's version becomes the next base. A refused save (another
   tab saved first) stops autosave and says so: nothing is overwritten. Evidence:
   clicking an event row (tr[data-event-id]) or pressing "e" on the selected one,
   or clicking a point of a plot (or Enter on a focused plot: trajectory.js's
   "trajectory:cite"), cites the event on the item in focus. Keys are listed in
   the "?" panel. */
(function () {
  "use strict";

  const SAVE_DELAY_MS = 800;
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
  const statusBox = form.querySelector("[data-save-status]");
  const versionShown = form.querySelector("[data-version-shown]");
  const conflictBox = form.querySelector("[data-conflict]");
  const submitButton = form.querySelector("[data-submit]");
  let version = parseInt(form.dataset.version, 10) || 0;
  let active = null; // the item in focus: evidence goes there
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
      body[list.dataset.list] = Array.from(list.querySelectorAll(":scope > [data-items] > [data-item]")).map(
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

  function submit() {
    if (readonly || stopped || submitting) return;
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

  function eventLabel(row) {
    const cells = row.querySelectorAll("td");
    const name = cells[4] ? cells[4].textContent.trim() : "Event " + row.dataset.eventId;
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

  function flash(text) {
    setState(form.dataset.saveState, text);
  }

  function addItem(field) {
    const list = form.querySelector('[data-list="' + field + '"]');
    if (!list || readonly) return;
    const template = list.querySelector("[data-item-template]");
    const item = template.content.firstElementChild.cloneNode(true);
    list.querySelector("[data-items]").appendChild(item);
    if (window.htmx) window.htmx.process(item);
    activate(item, false);
    item.querySelector("[data-text]").focus();
    changed();
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
    form.addEventListener("input", changed);
    form.addEventListener("change", changed);
    form.addEventListener("focusin", function (event) {
      const item = event.target.closest("[data-item]");
      if (item) activate(item, false);
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
        const item = remove.closest("[data-item]");
        if (item === active) active = null;
        item.remove();
        highlightEvidence();
        changed();
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
      // Enter in a text item: done with it, the item stays in focus for evidence.
      if (event.key === "Enter" && !event.ctrlKey && event.target.matches("[data-text]")) {
        event.preventDefault();
        const item = event.target.closest("[data-item]");
        event.target.blur();
        activate(item, true);
      }
    });
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
      citeEvent(String(id), event.detail.label);
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
    if (event.ctrlKey || event.metaKey || event.altKey || isTextField(event.target)) return;
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
