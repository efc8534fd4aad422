// Check: an uploaded transcript is read into the text box, so the same
// form posts it (and the page works the same without JavaScript, pasting).
// A file that is not UTF-8 is refused here, as `deloop check` refuses it.
const file = document.getElementById("file");
const text = document.getElementById("transcript");
const status = document.getElementById("file-status");

file?.addEventListener("change", async () => {
  const f = file.files[0];
  if (!f) return;
  const bytes = await f.arrayBuffer();
  try {
    text.value = new TextDecoder("utf-8", { fatal: true }).decode(bytes);
    status.textContent = `Loaded ${f.name} (${f.size} bytes).`;
  } catch {
    text.value = "";
    status.textContent = `${f.name} is not valid UTF-8: deloop check reads UTF-8 transcripts. Convert the file and load it again.`;
  }
});
