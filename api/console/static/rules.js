// Rules pages: read a chosen file into its textarea in the browser (FileReader; nothing is
// uploaded until the form is submitted). Inputs name their textarea with data-load-into.
"use strict";
(function () {
  var status = document.getElementById("load-status");
  function say(text) { if (status) { status.textContent = text; } }
  var inputs = document.querySelectorAll("input[type=file][data-load-into]");
  Array.prototype.forEach.call(inputs, function (input) {
    input.addEventListener("change", function () {
      var target = document.getElementById(input.getAttribute("data-load-into"));
      var file = input.files && input.files[0];
      if (!target || !file) { return; }
      var reader = new FileReader();
      reader.addEventListener("load", function () {
        target.value = String(reader.result).replace(/\r\n/g, "\n");
        say("Loaded " + file.name + " (" + file.size + " bytes) into the text area.");
        target.focus();
      });
      reader.addEventListener("error", function () {
        say("Could not read " + file.name + ": " + (reader.error ? reader.error.message : "unknown error"));
      });
      reader.readAsText(file, "utf-8");
    });
  });
})();
