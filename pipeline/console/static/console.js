// The console's one script: live refresh of what changes, and uploads. No framework; nothing
// fetched from anywhere but the console itself.
"use strict";

const POLL_MS = 2000;

function watchedIds() {
  const ids = new Set();
  for (const el of document.querySelectorAll("[data-job-id]")) ids.add(el.dataset.jobId);
  return [...ids].slice(0, 200);
}

function setText(root, selector, text) {
  const el = root.querySelector(selector);
  if (el && el.textContent !== text) el.textContent = text;
}

function apply(answer) {
  for (const [state, n] of Object.entries(answer.counts || {})) {
    for (const el of document.querySelectorAll(`[data-count="${state}"]`)) el.textContent = n;
  }
  for (const el of document.querySelectorAll("[data-job-id]")) {
    const job = (answer.jobs || {})[el.dataset.jobId];
    if (!job) continue;
    if (el.dataset.watch && el.dataset.watch !== job.state) {
      window.location.reload(); // a job's page: what it shows depends on its state
      return;
    }
    const state = el.querySelector("[data-state]");
    if (state) {
      state.textContent = job.state;
      state.className = `state ${job.state}`;
    }
    setText(el, "[data-stage]", job.stage || "");
    if (job.error_code) setText(el, "[data-error]", job.error_code);
  }
}

async function poll() {
  if (!document.hidden) {
    try {
      const ids = watchedIds().join(",");
      const answer = await fetch(`/console/live?ids=${ids}`, {
        headers: { Accept: "application/json" },
        credentials: "same-origin",
      });
      if (answer.ok) apply(await answer.json());
    } catch (_) {
      // the next poll tries again
    }
  }
  window.setTimeout(poll, POLL_MS);
}

function uploadRow(name) {
  const row = document.createElement("tr");
  for (const part of ["name", "job", "state", "stage", "error"]) {
    const cell = document.createElement("td");
    const inner = part === "state" ? document.createElement("span") : cell;
    inner.dataset[part] = "";
    if (inner !== cell) cell.append(inner);
    row.append(cell);
  }
  row.querySelector("[data-name]").textContent = name;
  row.querySelector("[data-state]").textContent = "uploading";
  row.querySelector("[data-state]").className = "state";
  document.querySelector("#uploads tbody").append(row);
  return row;
}

function accepted(row, job) {
  row.dataset.jobId = job.job_id;
  const link = document.createElement("a");
  link.href = `/console/jobs/${job.job_id}`;
  link.textContent = job.job_id.slice(0, 8);
  link.className = "mono";
  row.querySelector("[data-job]").append(link);
  row.querySelector("[data-state]").textContent = job.deduplicated ? "deduplicated" : "queued";
}

function refused(row, code, message) {
  const state = row.querySelector("[data-state]");
  state.textContent = "refused";
  state.className = "state failed";
  row.querySelector("[data-error]").textContent = `${code}: ${message}`;
}

async function send(form, file) {
  const row = uploadRow(file.name);
  const body = new FormData();
  body.append("file", file, file.name);
  const formats = [...form.querySelectorAll("input[name=to]:checked")].map((el) => el.value);
  body.append("to", formats.join(",") || "md");
  body.append("priority", form.querySelector("input[name=priority]").value || "0");
  // Sent as typed: the server checks them as POST /v1/jobs does (E110 names a bad one).
  for (const name of ["pages", "ocr_lang", "password_env", "webhook"]) {
    const input = form.querySelector(`input[name=${name}]`);
    if (input && !input.disabled && input.value.trim()) body.append(name, input.value.trim());
  }
  const textOnly = form.querySelector("input[name=text_layer_only]");
  if (textOnly && !textOnly.disabled && textOnly.checked) body.append("text_layer_only", "true");
  try {
    const answer = await fetch("/console/upload", {
      method: "POST",
      body,
      credentials: "same-origin",
      headers: { Accept: "application/json", "X-CSRF-Token": form.dataset.csrf },
    });
    const data = await answer.json();
    if (!answer.ok) refused(row, data.error.code, data.error.message);
    else if (data.accepted.length) accepted(row, data.accepted[0]);
    else refused(row, data.rejected[0].code, data.rejected[0].message);
  } catch (err) {
    refused(row, "network", String(err));
  }
}

function setUpUpload(form) {
  const input = form.querySelector("#files");
  const drop = form.querySelector("#drop");
  form.addEventListener("submit", (event) => {
    event.preventDefault();
    for (const file of input.files) send(form, file);
    input.value = "";
  });
  drop.addEventListener("dragover", (event) => {
    event.preventDefault();
    drop.classList.add("over");
  });
  drop.addEventListener("dragleave", () => drop.classList.remove("over"));
  drop.addEventListener("drop", (event) => {
    event.preventDefault();
    drop.classList.remove("over");
    for (const file of event.dataTransfer.files) send(form, file);
  });
}

document.addEventListener("DOMContentLoaded", () => {
  const form = document.querySelector("#upload");
  if (form) setUpUpload(form);
  if (document.querySelector(".logout")) poll(); // signed in: counts now, then every POLL_MS
});
