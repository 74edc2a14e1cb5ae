// The recorder of `voicectl mic`. Gradio runs this file as the js_on_load of a gr.HTML component (recorder.html),
// with `element` (the component's root) and `props` (`recording_path`, `speak_path`, `target`: set by voice_client/mic.py).
//
// One recording = one WebSocket to voicectl mic = one transcription. The microphone is captured by an AudioWorklet
// at the AudioContext's sample rate and every sample is sent, as float32 little-endian mono frames, from the moment
// the microphone opens to the moment Stop is pressed. voice_client/mic.py documents the messages.
//
// Gradio's streaming gr.Audio is not used: it sends the audio in fixed chunks and drops what was recorded after the
// last full chunk when Stop is pressed, and chunks captured while its stream is starting (gradio 6.31 Audio frontend).
//
// State for tests and debugging, on the `.voicectl-recorder` element's dataset: `state` (idle, connecting, recording,
// finishing, done, error, empty; "connecting" lasts until the endpoint has accepted the stream, i.e. until the
// server's "started", sent at the endpoint's first event: audio captured meanwhile is kept and sent, none is lost),
// `samples` (samples captured in this recording), `sampleRate` (Hz), `level` (the input's peak of the last 100 ms,
// 0-1), `device` (the microphone's label), `stalled` (seconds without an answer).
//
// The WebSocket (and so the stream to the endpoint) opens at the first captured audio: a recording stopped before
// any audio (zero length) opens no stream. Accessibility: the transcript is a labelled log that is not itself live;
// only the words new since the last update go to a polite live region, and focus moves to the other button when
// the focused one becomes disabled.

const SEND_EVERY_S = 0.05; // audio per WebSocket message: 50 ms keeps latency low at 20 messages a second
// The model hears the microphone as it is: echo cancellation, noise suppression and gain control are made for calls.
const MEDIA_CONSTRAINTS = { audio: { echoCancellation: false, noiseSuppression: false, autoGainControl: false } };
const TAP_NAME = "voicectl-tap";
// Posts a copy of every 128-frame block of its (mono) input; on any message it stops and posts null, which arrives
// after every block posted before it (a port delivers messages in order).
const TAP_PROCESSOR = `
class VoicectlTap extends AudioWorkletProcessor {
  constructor() {
    super();
    this.live = true;
    this.port.onmessage = () => {
      this.live = false;
      this.port.postMessage(null);
    };
  }
  process(inputs) {
    const channel = inputs[0][0];
    if (this.live && channel) this.port.postMessage(channel.slice(0));
    return this.live;
  }
}
registerProcessor("${TAP_NAME}", VoicectlTap);
`;

const root = element.querySelector(".voicectl-recorder");
const part = (name) => root.querySelector(`[data-part="${name}"]`);
const ui = {
  record: part("record"),
  stop: part("stop"),
  status: part("status"),
  timer: part("timer"),
  level: part("level"),
  device: part("device"),
  error: part("error"),
  errorSummary: part("error-summary"),
  errorDetail: part("error-detail"),
  transcript: part("transcript"),
  announce: part("announce"),
  copy: part("copy"),
  downloadText: part("download-text"),
  downloadJson: part("download-json"),
  figures: part("figures"),
};
const LEVEL_WINDOW_S = 0.1; // the level meter shows the peak of the last 100 ms
let lastRecord = null; // {text, result, figures, ...} of the last recording, for copy and download
let tapModuleUrl = null;
let current = null;

function setState(state, status) {
  root.dataset.state = state;
  ui.status.textContent = status;
  const focused = document.activeElement;
  ui.record.disabled = !["idle", "done", "error", "empty"].includes(state);
  ui.stop.disabled = !["connecting", "recording"].includes(state);
  // Keep focus on a usable control: a disabled button loses focus to <body> otherwise. While both buttons are
  // disabled (finishing) the transcript holds it, and hands it to Record once Record is usable again.
  const lost = (focused === ui.record && ui.record.disabled) || (focused === ui.stop && ui.stop.disabled);
  if (lost || (focused === ui.transcript && focusParked)) {
    const next = !ui.stop.disabled ? ui.stop : !ui.record.disabled ? ui.record : ui.transcript;
    focusParked = next === ui.transcript;
    next.focus();
  }
}
let focusParked = false;

function showTime(samples, rate) {
  const seconds = rate ? Math.floor(samples / rate) : 0;
  ui.timer.textContent = `${Math.floor(seconds / 60)}:${String(seconds % 60).padStart(2, "0")}`;
}

function showTranscript(text) {
  const previous = ui.transcript.textContent;
  if (text === previous) return;
  const box = ui.transcript;
  const following = box.scrollTop + box.clientHeight >= box.scrollHeight - 4; // the user has not scrolled up
  box.textContent = text;
  if (following) box.scrollTop = box.scrollHeight;
  // Announce only the new words (a replay that re-grows the text announces nothing it already said).
  if (text.startsWith(previous) && text.length > previous.length) ui.announce.textContent = text.slice(previous.length);
}

function enableExports(enabled) {
  ui.copy.disabled = ui.downloadText.disabled = ui.downloadJson.disabled = !enabled;
}

function download(name, type, content) {
  const url = URL.createObjectURL(new Blob([content], { type }));
  const link = document.createElement("a");
  link.href = url;
  link.download = name;
  document.body.appendChild(link);
  link.click();
  link.remove();
  setTimeout(() => URL.revokeObjectURL(url), 1000);
}

async function listDevices() {
  if (!navigator.mediaDevices || !navigator.mediaDevices.enumerateDevices) return;
  const chosen = ui.device.value;
  const inputs = (await navigator.mediaDevices.enumerateDevices()).filter((device) => device.kind === "audioinput");
  ui.device.replaceChildren(new Option("Default microphone", ""));
  inputs.forEach((device, index) => {
    if (device.deviceId && device.deviceId !== "default") {
      ui.device.append(new Option(device.label || `Microphone ${index + 1}`, device.deviceId));
    }
  });
  ui.device.value = [...ui.device.options].some((option) => option.value === chosen) ? chosen : "";
}

function recordingUrl() {
  const url = new URL(props.recording_path, window.location.href);
  url.protocol = url.protocol === "https:" ? "wss:" : "ws:";
  url.search = "";
  url.hash = "";
  return url.href;
}

function describeStartError(error) {
  switch (error && error.name) {
    case "NotAllowedError":
      return "the browser denied access to the microphone: allow it for this page in the site settings, " +
        "then press Record again";
    case "NotFoundError":
      return "no microphone found: connect one, then press Record again";
    case "NotReadableError":
      return "the microphone cannot be read (another application may hold it): free it, then press Record again";
    default:
      return `recording could not start: ${(error && error.message) || error}`;
  }
}

class Recording {
  constructor() {
    this.startedAt = new Date().toISOString();
    this.pending = [];
    this.pendingSamples = 0;
    this.samples = 0;
    this.sampleRate = 0;
    this.stopRequested = false;
    this.flushed = false;
    this.stopSent = false;
    this.finished = false;
  }

  async start() {
    setState("connecting", "Opening the microphone…");
    if (!window.isSecureContext || !window.AudioWorkletNode) {
      throw new Error("the microphone needs a secure page: open it as http://127.0.0.1:<port> or over https");
    }
    const deviceId = ui.device.value;
    const constraints = deviceId ? { audio: { ...MEDIA_CONSTRAINTS.audio, deviceId: { exact: deviceId } } }
      : MEDIA_CONSTRAINTS;
    this.media = await navigator.mediaDevices.getUserMedia(constraints);
    const track = this.media.getAudioTracks()[0];
    root.dataset.device = (track && track.label) || "microphone";
    listDevices().catch(() => {}); // labels are readable once the microphone is granted
    this.context = new AudioContext();
    tapModuleUrl ??= URL.createObjectURL(new Blob([TAP_PROCESSOR], { type: "text/javascript" }));
    await this.context.audioWorklet.addModule(tapModuleUrl);
    await this.context.resume();
    if (this.finished) return this.release(); // failed while the microphone was opening
    this.sampleRate = this.context.sampleRate;
    root.dataset.sampleRate = String(this.sampleRate);
    root.dataset.samples = "0";
    this.tap = new AudioWorkletNode(this.context, TAP_NAME, {
      numberOfInputs: 1,
      numberOfOutputs: 0,
      channelCount: 1,
      channelCountMode: "explicit", // the Web Audio API mixes any microphone down to mono
      channelInterpretation: "speakers",
    });
    this.tap.port.onmessage = (event) => (event.data === null ? this.onFlushed() : this.onAudio(event.data));
    if (this.stopRequested) return this.onFlushed(); // stopped before any audio: nothing to capture or send
    this.context.createMediaStreamSource(this.media).connect(this.tap);
    setState("connecting", `Connecting to ${props.target}… Listening to ${root.dataset.device}; what you say is ` +
      "kept and sent once the endpoint accepts.");
  }

  // The recording's WebSocket, opened at the first captured audio (a zero-length recording opens none).
  openSocket() {
    this.socket = new WebSocket(recordingUrl());
    this.socket.binaryType = "arraybuffer";
    this.socket.onopen = () => {
      this.socket.send(JSON.stringify({ type: "start", sample_rate_hz: this.sampleRate }));
      this.pump();
    };
    this.socket.onmessage = (event) => this.onMessage(JSON.parse(event.data));
    this.socket.onclose = (event) => this.onClose(event);
  }

  stop() {
    if (this.stopRequested || this.finished) return;
    this.stopRequested = true;
    setState("finishing", "Finishing the transcript…");
    if (this.tap) this.tap.port.postMessage("flush"); // else start() flushes once the tap exists
  }

  onAudio(block) {
    if (!this.socket) this.openSocket();
    this.pending.push(block);
    this.pendingSamples += block.length;
    this.samples += block.length;
    root.dataset.samples = String(this.samples);
    showTime(this.samples, this.sampleRate);
    let peak = 0;
    for (const sample of block) peak = Math.max(peak, Math.abs(sample));
    this.levelPeak = Math.max(this.levelPeak || 0, peak);
    this.levelSamples = (this.levelSamples || 0) + block.length;
    if (this.levelSamples >= this.sampleRate * LEVEL_WINDOW_S) {
      ui.level.value = Math.min(1, this.levelPeak);
      root.dataset.level = this.levelPeak.toFixed(3);
      this.levelPeak = 0;
      this.levelSamples = 0;
    }
    this.pump();
  }

  onFlushed() {
    this.flushed = true;
    this.media.getTracks().forEach((track) => track.stop()); // the browser's microphone indicator goes off
    ui.level.value = 0;
    if (this.samples === 0 && !this.socket) { // nothing was captured: no stream is opened for it
      this.finished = true;
      setState("empty", "Nothing was recorded, so nothing was sent. Press Record and speak.");
      this.release();
      return;
    }
    this.pump();
  }

  // Sends what was captured once the socket is open: every SEND_EVERY_S, and all of it (then "stop") once flushed.
  pump() {
    if (!this.socket || this.socket.readyState !== WebSocket.OPEN) return;
    if (this.pendingSamples > 0 && (this.flushed || this.pendingSamples >= this.sampleRate * SEND_EVERY_S)) {
      const frame = new Float32Array(this.pendingSamples); // platform byte order: little-endian on every browser host
      let offset = 0;
      for (const block of this.pending) {
        frame.set(block, offset);
        offset += block.length;
      }
      this.pending = [];
      this.pendingSamples = 0;
      this.socket.send(frame.buffer);
    }
    if (this.flushed && !this.stopSent) {
      this.stopSent = true;
      this.socket.send(JSON.stringify({ type: "stop", samples: this.samples }));
    }
  }

  onMessage(message) {
    if (this.finished) return;
    if (message.type === "started") {
      this.recordingStatus = `Recording: streaming to ${message.target}. Press Stop when done.`;
      if (!this.stopRequested) setState("recording", this.recordingStatus);
    } else if (message.type === "stall") {
      if (this.stopRequested) return;
      if (message.silent_s > 0) {
        root.dataset.stalled = String(message.silent_s);
        setState("recording", `No answer from the endpoint for ${message.silent_s} s; still sending. ` +
          "Press Stop to end, or wait.");
      } else {
        delete root.dataset.stalled;
        setState("recording", this.recordingStatus);
      }
    } else if (message.type === "transcript") {
      showTranscript(message.text);
    } else if (message.type === "done") {
      this.finished = true;
      showTranscript(message.text);
      ui.figures.textContent = message.figures;
      this.keep(message.text, message.result, message.figures, null);
      setState("done", "Done. Press Record to start again.");
      this.release();
    } else if (message.type === "error") {
      this.fail(message.message, message.text, message.summary);
    }
  }

  onClose(event) {
    if (!this.finished) {
      this.fail(`the connection to voicectl mic closed (WebSocket code ${event.code}) before the transcript was ` +
        "complete: check that voicectl mic is still running, then press Record again");
    }
  }

  // Shows one error and leaves it there: the recording is over, nothing is retried behind the user's back.
  fail(message, text, summary) {
    if (this.finished) return;
    this.finished = true;
    if (text) showTranscript(text);
    ui.errorSummary.textContent = summary || message;
    ui.errorDetail.textContent = message;
    ui.error.querySelector("details").hidden = !summary || summary === message;
    ui.error.hidden = false;
    this.keep(ui.transcript.textContent, null, "", message);
    setState("error", "Stopped by the error below. Press Record to try again.");
    this.release();
  }

  // The recording's text and figures, for Copy and Download.
  keep(text, result, figures, error) {
    lastRecord = {
      transcript: text, figures, error, result,
      recorded_s: this.sampleRate ? this.samples / this.sampleRate : 0,
      sample_rate_hz: this.sampleRate, device: root.dataset.device || null,
      started_at: this.startedAt, ended_at: new Date().toISOString(),
    };
    enableExports(Boolean(text));
  }

  release() {
    if (this.media) this.media.getTracks().forEach((track) => track.stop());
    if (this.tap) this.tap.port.onmessage = null;
    if (this.context && this.context.state !== "closed") this.context.close();
    if (this.socket) {
      this.socket.onclose = null;
      if (this.socket.readyState <= WebSocket.OPEN) this.socket.close(1000);
    }
  }
}

ui.record.addEventListener("click", () => {
  ui.transcript.textContent = "";
  ui.announce.textContent = "";
  ui.figures.textContent = "";
  ui.errorSummary.textContent = ui.errorDetail.textContent = "";
  ui.error.hidden = true;
  delete root.dataset.stalled;
  showTime(0, 0);
  const recording = new Recording();
  current = recording;
  recording.start().catch((error) => recording.fail(describeStartError(error)));
});
ui.stop.addEventListener("click", () => current && current.stop());
ui.copy.addEventListener("click", async () => {
  if (!lastRecord) return;
  try {
    await navigator.clipboard.writeText(lastRecord.transcript);
    ui.status.textContent = "Transcript copied.";
  } catch (error) {
    ui.status.textContent = `The browser did not allow copying (${error.name}): select the text and copy it.`;
  }
});
ui.downloadText.addEventListener("click", () => lastRecord &&
  download("transcript.txt", "text/plain;charset=utf-8", lastRecord.transcript + "\n"));
ui.downloadJson.addEventListener("click", () => lastRecord &&
  download("transcript.json", "application/json", JSON.stringify(lastRecord, null, 2) + "\n"));
listDevices().catch(() => {});

// ---- Speak: text in, Sonic's audio played as it streams (SPEAK_PATH in voice_client/mic.py) ----------------------
const speakUi = {
  text: part("speak-text"), button: part("speak"), status: part("speak-status"), error: part("speak-error"),
  errorSummary: part("speak-error-summary"), errorDetail: part("speak-error-detail"),
};

let speaking = null; // the Speak panel's WebSocket while Sonic speaks

function speak() {
  const text = speakUi.text.value.trim();
  if (!text) {
    speakUi.status.textContent = "Type a text to speak first.";
    return;
  }
  speakUi.error.hidden = true;
  speakUi.button.disabled = true;
  root.dataset.speakState = "speaking";
  root.dataset.speakSamples = "0";
  delete root.dataset.firstAudioMs;
  speakUi.status.textContent = "Asking Sonic…";
  const clicked = performance.now();
  const context = new AudioContext();
  let rate = 0;
  let next = 0;
  let ended = false;
  const url = new URL(props.speak_path, window.location.href);
  url.protocol = url.protocol === "https:" ? "wss:" : "ws:";
  const socket = new WebSocket(url.href);
  speaking = socket;
  socket.binaryType = "arraybuffer";
  const finish = (state, status) => {
    ended = true;
    speaking = null;
    root.dataset.speakState = state;
    speakUi.status.textContent = status;
    speakUi.button.disabled = false;
    if (document.activeElement === document.body) speakUi.button.focus();
    socket.onclose = null;
  };
  socket.onopen = () => socket.send(JSON.stringify({ type: "speak", text }));
  socket.onmessage = (event) => {
    if (typeof event.data !== "string") { // PCM16 little-endian mono at `rate`
      const pcm = new Int16Array(event.data);
      if (!pcm.length) return;
      const buffer = context.createBuffer(1, pcm.length, rate);
      const channel = buffer.getChannelData(0);
      for (let i = 0; i < pcm.length; i++) channel[i] = pcm[i] / 32768;
      const source = context.createBufferSource();
      source.buffer = buffer;
      source.connect(context.destination);
      next = Math.max(next, context.currentTime);
      source.start(next);
      next += buffer.duration;
      root.dataset.speakSamples = String(Number(root.dataset.speakSamples) + pcm.length);
      if (root.dataset.firstAudioMs === undefined) {
        root.dataset.firstAudioMs = String(Math.round(performance.now() - clicked));
        speakUi.status.textContent = `Playing; first audio after ${((performance.now() - clicked) / 1000).toFixed(2)} s.`;
      }
      return;
    }
    const message = JSON.parse(event.data);
    if (message.type === "audio") rate = message.sample_rate_hz;
    else if (message.type === "done") {
      const first = (Number(root.dataset.firstAudioMs) / 1000).toFixed(2);
      finish("done", `Spoken: ${message.audio_s.toFixed(2)} s of audio; first audio after ${first} s.`);
    } else if (message.type === "error") {
      speakUi.errorSummary.textContent = message.summary || message.message;
      speakUi.errorDetail.textContent = message.message;
      speakUi.error.hidden = false;
      finish("error", "Not spoken: see the error below.");
    }
  };
  socket.onclose = (event) => {
    if (!ended) finish("error", `The connection to voicectl mic closed (code ${event.code}): is it still running?`);
  };
}
speakUi.button.addEventListener("click", speak);
// Leaving or reloading the page ends the recording and the speech as soon as the navigation
// starts, not when the next page has loaded: the server then closes the stream to the endpoint
// and cancels the Sonic request (closing a tab closes the sockets in any case).
window.addEventListener("beforeunload", () => {
  if (current) current.release();
  if (speaking) speaking.close();
});
setState("idle", "Press Record and speak.");
