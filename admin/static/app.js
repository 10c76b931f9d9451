// copytrack admin: progressive enhancements only; every page works without this file.
"use strict";

document.addEventListener("DOMContentLoaded", () => {
  // Bulk selection on the findings list.
  const all = document.getElementById("select-all");
  const count = document.getElementById("selected-count");
  const boxes = () => document.querySelectorAll('input[name="ids"][form="bulk"]');
  const recount = () => {
    if (count) count.textContent = [...boxes()].filter((b) => b.checked).length;
  };
  if (all) {
    all.addEventListener("change", () => {
      boxes().forEach((b) => { b.checked = all.checked; });
      recount();
    });
  }
  boxes().forEach((b) => b.addEventListener("change", recount));

  // Destructive forms ask first.
  document.querySelectorAll("form[data-confirm]").forEach((form) => {
    form.addEventListener("submit", (event) => {
      if (!window.confirm(form.dataset.confirm)) event.preventDefault();
    });
  });

  // A dismiss asks first: a finding dismissed by a slip leaves the open findings unseen.
  document.querySelectorAll("button[data-confirm]").forEach((button) => {
    button.addEventListener("click", (event) => {
      if (!window.confirm(button.dataset.confirm)) event.preventDefault();
    });
  });
  document.querySelectorAll("form[data-confirm-dismiss]").forEach((form) => {
    form.addEventListener("submit", (event) => {
      // A change of the whole list asks on its own page, with the count.
      if (event.submitter && "asksFirst" in event.submitter.dataset) return;
      if (form.elements.status.value === "dismissed" && !window.confirm(form.dataset.confirmDismiss)) {
        event.preventDefault();
      }
    });
  });

  // "d" opens a small dialog where 1-4 (or a click) choose the dismissal's reason: the
  // choice is the confirmation, so no native confirm follows; Esc keeps the finding open.
  const dismissDialog = document.getElementById("dismiss-dialog");
  const dismissAs = (reason) => {
    const form = dismissDialog.closest("form");
    form.elements.reason.value = reason;
    dismissDialog.close();
    // Submitted as by the button (status=dismissed), without its click's native confirm.
    form.requestSubmit(document.getElementById("to-dismissed"));
  };
  if (dismissDialog) {
    dismissDialog.querySelectorAll("[data-dismiss-reason]").forEach((choice) => {
      choice.addEventListener("click", () => dismissAs(choice.dataset.dismissReason));
    });
    dismissDialog.addEventListener("keydown", (event) => {
      if (!dismissDialog.open) return;
      const choices = dismissDialog.querySelectorAll("[data-dismiss-reason]");
      const n = Number.parseInt(event.key, 10);
      if (n >= 1 && n <= choices.length) {
        event.preventDefault();
        dismissAs(choices[n - 1].dataset.dismissReason);
      }
    });
  }

  // Reviewing from the keyboard: j/k next and previous finding, c confirm, d dismiss.
  const keys = { j: "#next-finding", k: "#prev-finding", c: "#to-confirmed", d: "#to-dismissed" };
  document.addEventListener("keydown", (event) => {
    if (event.ctrlKey || event.metaKey || event.altKey) return;
    // A closed dialog can keep the focus on one of its buttons (Chromium after Esc, now and
    // then), so only an open one holds the keys back.
    if (event.target.closest("input, textarea, select, [contenteditable], dialog[open]")) return;
    if (event.key === "d" && dismissDialog) {
      event.preventDefault();
      dismissDialog.showModal();
      return;
    }
    const target = keys[event.key] && document.querySelector(keys[event.key]);
    if (target) {
      event.preventDefault();
      target.click();
    }
  });

  // A notice's deadline moved: the "N working days" its text asks for follows (Saturdays
  // and Sundays do not count, as tracker.findings.notices.working_days_after).
  const deadline = document.getElementById("notice-deadline");
  const noticeBody = document.getElementById("notice-body");
  if (deadline && noticeBody) {
    deadline.addEventListener("change", () => {
      const day = new Date(`${deadline.dataset.today}T00:00:00Z`);
      const end = new Date(`${deadline.value}T00:00:00Z`);
      if (Number.isNaN(end.getTime()) || end <= day) return;
      let days = 0;
      while (day < end) {
        day.setUTCDate(day.getUTCDate() + 1);
        if (day.getUTCDay() !== 0 && day.getUTCDay() !== 6) days += 1;
      }
      noticeBody.value = noticeBody.value
        .replace(/within \d+ working days?/, `within ${days} working day${days === 1 ? "" : "s"}`)
        .replace(/\d+ 个工作日内/, `${days} 个工作日内`);
      deadline.dataset.days = String(days);
    });
  }

  // Copy buttons (tokens, notices).
  document.querySelectorAll("[data-copy]").forEach((button) => {
    button.addEventListener("click", async () => {
      const source = document.getElementById(button.dataset.copy);
      try {
        await navigator.clipboard.writeText(source.value);
        button.textContent = button.dataset.copied || "Copied";
      } catch {
        source.select();
      }
    });
  });

  document.querySelectorAll("[data-print]").forEach((button) => {
    button.addEventListener("click", () => window.print());
  });

  // Matched passages: clicking one side scrolls the other side to its counterpart.
  const focusPair = (index, sides) => {
    document.querySelectorAll("mark.hl.focus").forEach((m) => m.classList.remove("focus"));
    sides.forEach((side) => {
      const mark = document.getElementById(`${side}-${index}`);
      if (!mark) return;
      mark.classList.add("focus");
      const column = mark.closest(".text-col");
      if (column) column.scrollTop = mark.offsetTop - column.offsetTop - column.clientHeight / 3;
    });
  };
  document.querySelectorAll("mark.hl[data-side]").forEach((mark) => {
    const other = mark.dataset.side === "master" ? "page" : "master";
    const go = () => focusPair(mark.dataset.pair, [mark.dataset.side, other]);
    mark.addEventListener("click", go);
    mark.addEventListener("keydown", (event) => { if (event.key === "Enter") go(); });
  });
  // Each pane opens at its first matched passage, not at the top of a long text.
  document.querySelectorAll(".text-col").forEach((column) => {
    const first = column.querySelector("mark.hl");
    if (first) column.scrollTop = first.offsetTop - column.offsetTop - 16;
  });
  // The capture frame opens at its first marked passage: its address ends in that mark's
  // fragment, but the browser scrolls there when it loads, which may be before the frame
  // has its size, or from a reload's remembered position (the frame then opened near the
  // capture's bottom, 1 load in about 20). The sandbox keeps this page out of the frame
  // (no scripts there, an opaque origin), but a parent may still navigate its frame: to
  // the same address with the fragment, which only scrolls, nothing is fetched again.
  document.querySelectorAll("iframe.evidence").forEach((frame) => {
    const anchor = () => {
      try {
        frame.contentWindow.location.replace(frame.src);
      } catch {
        // a frame gone: nothing to scroll
      }
    };
    const loaded = () => {
      if (frame.dataset.anchored === frame.src) return; // once per address: never a loop
      frame.dataset.anchored = frame.src;
      anchor();
    };
    frame.addEventListener("load", loaded);
    // A small capture may have loaded before this script ran: the page's own load event
    // comes after its frames' in any case.
    window.addEventListener("load", loaded);
    let size = "";
    new ResizeObserver(([entry]) => {
      const now = `${Math.round(entry.contentRect.width)}x${Math.round(entry.contentRect.height)}`;
      if (size && now !== size) anchor(); // the layout changed under the reader
      size = now;
    }).observe(frame);
    // The parts of a large capture open through the frame's own address, so that the
    // frame's address is always the part shown.
    document.querySelectorAll('a[target="capture"]').forEach((link) => {
      link.addEventListener("click", (event) => {
        event.preventDefault();
        frame.src = link.href;
      });
    });
  });
  document.querySelectorAll("a.pair-link").forEach((link) => {
    link.addEventListener("click", (event) => {
      event.preventDefault();
      document.getElementById("master-text")?.scrollIntoView({ behavior: "smooth", block: "start" });
      focusPair(link.dataset.pair, ["master", "page"]);
    });
  });

  // Runs still going: their state, health and figures follow the run without a reload
  // (the run page reloads once the run is over, to list what it skipped and failed).
  document.querySelectorAll("[data-live-run]").forEach((box) => {
    if (box.dataset.done === "true") return;
    const show = (progress) => {
      Object.entries(progress.figures).forEach(([key, value]) => {
        const cell = box.querySelector(`[data-figure="${CSS.escape(key)}"]`);
        if (cell) cell.textContent = value;
      });
      const state = box.querySelector("[data-run-state]");
      if (state) {
        state.textContent = progress.state_label || progress.state;
        state.className = `badge run-${progress.state}`;
      }
      const health = box.querySelector("[data-run-health]");
      if (health) {
        health.textContent = progress.health.message;
        health.className = `health health-${progress.health.level}`;
      }
      // A run waiting for a worker that no one runs says so (and stops saying it).
      const waiting = document.querySelector("[data-run-waiting]");
      if (waiting && "waiting" in progress) {
        waiting.textContent = progress.waiting || "";
        waiting.hidden = !progress.waiting;
      }
    };
    const poll = async () => {
      let progress = null;
      try {
        const answer = await fetch(box.dataset.liveRun, { headers: { Accept: "application/json" } });
        if (answer.ok) progress = await answer.json();
      } catch {
        progress = null; // offline for a moment: try again later
      }
      if (!progress) return setTimeout(poll, 10000);
      show(progress);
      if (!progress.done) return setTimeout(poll, 2000);
      box.dataset.done = "true";
      if (box.dataset.reloadWhenDone) window.location.reload();
    };
    setTimeout(poll, 2000);
  });

  // Uploading works: big files are announced before they go (one file is one work, cut
  // into chapters), and the upload shows its progress, then the wait while it is indexed.
  const upload = document.getElementById("upload-form");
  if (upload) {
    const input = upload.querySelector('input[type="file"]');
    const warning = document.getElementById("upload-warning");
    const confirmBig = document.getElementById("upload-confirm");
    const later = document.getElementById("upload-later");
    const big = Number(upload.dataset.bigBytes);
    // The page's own words, in its language: "{name} …" with the values put in.
    const say = (key, values) =>
      upload.dataset[key].replace(/\{(\w+)\}/g, (_, name) => String(values[name]));
    const maxChars = Number(upload.dataset.maxChars);
    const chapterChars = Number(upload.dataset.chapterChars);
    // The chapters the library will cut a text into, as tracker.masters.library._chapters cuts
    // them: past maxChars, pieces of chapterChars ending at the last line break past
    // their half. Counted on the text (code points), not guessed from the bytes.
    const chapterCount = (text) => {
      const chars = Array.from(text);
      if (chars.length <= maxChars) return 1;
      let count = 0;
      for (let start = 0; start < chars.length; count += 1) {
        let stop = Math.min(start + chapterChars, chars.length);
        if (stop < chars.length) {
          const cut = chars.lastIndexOf("\n", stop - 1);
          if (cut >= start + Math.floor(chapterChars / 2)) stop = cut + 1;
        }
        start = stop;
      }
      return count;
    };
    const decoded = async (file) => {
      const bytes = await file.arrayBuffer();
      try {
        return new TextDecoder("utf-8", { fatal: true, ignoreBOM: false }).decode(bytes);
      } catch {
        return new TextDecoder("gb18030").decode(bytes);
      }
    };
    input.addEventListener("change", async () => {
      const plain = [...input.files].filter((file) => file.size > big && /\.(txt|md)$/i.test(file.name));
      const counted = await Promise.all(plain.map(async (file) => [file, chapterCount(await decoded(file))]));
      const large = counted.filter(([, chapters]) => chapters > 1);
      warning.hidden = large.length === 0;
      confirmBig.required = large.length > 0;
      const size = (file) => (file.size / 2 ** 20).toFixed(1);
      const items = (pairs, key) => pairs.map(([file, chapters]) => {
        const item = document.createElement("li");
        item.textContent = say(key, { name: file.name, size: size(file), chapters });
        return item;
      });
      warning.querySelector("ul").replaceChildren(...items(large, "textBig"));
      // A Word, EPUB or PDF master is unpacked on the server: its chapters are counted
      // there, and the result names them (never a guess from its compressed size).
      const documents = [...input.files].filter((file) => /\.(docx|epub|pdf)$/i.test(file.name));
      later.hidden = documents.length === 0;
      later.querySelector("ul").replaceChildren(...items(documents.map((file) => [file, 0]), "textLater"));
    });
    upload.addEventListener("submit", (event) => {
      event.preventDefault();
      const bar = document.getElementById("upload-progress");
      const status = document.getElementById("upload-status");
      const button = upload.querySelector('button[type="submit"]');
      bar.hidden = status.hidden = false;
      button.disabled = true;
      const request = new XMLHttpRequest();
      request.open("POST", upload.action);
      request.upload.addEventListener("progress", (step) => {
        if (!step.lengthComputable) return;
        bar.max = step.total;
        bar.value = step.loaded;
        status.textContent = say("textUploading", { percent: Math.round((100 * step.loaded) / step.total) });
      });
      request.upload.addEventListener("load", () => {
        bar.removeAttribute("value"); // indeterminate: the server is at work
        status.textContent = say("textIndexing", {});
      });
      request.addEventListener("load", () => {
        const answer = new DOMParser().parseFromString(request.responseText, "text/html");
        document.title = answer.title;
        document.body.replaceWith(answer.body);
        window.scrollTo(0, 0);
      });
      request.addEventListener("error", () => {
        status.textContent = say("textFailed", {});
        button.disabled = false;
      });
      request.send(new FormData(upload));
    });
  }
});
