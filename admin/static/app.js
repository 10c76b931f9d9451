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

  // Copy buttons (tokens, notices).
  document.querySelectorAll("[data-copy]").forEach((button) => {
    button.addEventListener("click", async () => {
      const source = document.getElementById(button.dataset.copy);
      try {
        await navigator.clipboard.writeText(source.value);
        button.textContent = "Copied";
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
  document.querySelectorAll("a.pair-link").forEach((link) => {
    link.addEventListener("click", (event) => {
      event.preventDefault();
      document.getElementById("master-text")?.scrollIntoView({ behavior: "smooth", block: "start" });
      focusPair(link.dataset.pair, ["master", "page"]);
    });
  });
});
