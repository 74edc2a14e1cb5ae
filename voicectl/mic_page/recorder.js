// The recorder of `voicectl mic`. Gradio runs this file as the js_on_load of a gr.HTML component (recorder.html),
// with `element` (the component's root) and `props` (`recording_path`, set by voicectl/mic.py).
//
// One recording = one WebSocket to voicectl mic = one transcription. The microphone is captured by an AudioWorklet
// at the AudioContext's sample rate and every sample is sent, as float32 little-endian mono frames, from the moment
// the microphone opens to the moment Stop is pressed. voicectl/mic.py documents the messages.
//
// Gradio's streaming gr.Audio is not used: it sends the audio in fixed chunks and drops what was recorded after the
// last full chunk when Stop is pressed, and chunks captured while its stream is starting (gradio 6.31 Audio frontend).
//
// State for tests and debugging, on the `.voicectl-recorder` element's dataset: `state` (idle, connecting, recording,
// finishing, done, error), `samples` (samples captured in this recording) and `sampleRate` (Hz).

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
  error: part("error"),
  transcript: part("transcript"),
  figures: part("figures"),
};
let tapModuleUrl = null;
let current = null;

function setState(state, status) {
  root.dataset.state = state;
  ui.status.textContent = status;
  ui.record.disabled = !["idle", "done", "error"].includes(state);
  ui.stop.disabled = !["connecting", "recording"].includes(state);
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
    this.media = await navigator.mediaDevices.getUserMedia(MEDIA_CONSTRAINTS);
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
    this.socket = new WebSocket(recordingUrl());
    this.socket.binaryType = "arraybuffer";
    this.socket.onopen = () => {
      this.socket.send(JSON.stringify({ type: "start", sample_rate_hz: this.sampleRate }));
      this.pump();
    };
    this.socket.onmessage = (event) => this.onMessage(JSON.parse(event.data));
    this.socket.onclose = (event) => this.onClose(event);
    this.context.createMediaStreamSource(this.media).connect(this.tap);
    if (this.stopRequested) this.tap.port.postMessage("flush");
    else setState("connecting", "Connecting to the endpoint… (recording)");
  }

  stop() {
    if (this.stopRequested || this.finished) return;
    this.stopRequested = true;
    setState("finishing", "Finishing the transcript…");
    if (this.tap) this.tap.port.postMessage("flush"); // else start() flushes once the tap exists
  }

  onAudio(block) {
    this.pending.push(block);
    this.pendingSamples += block.length;
    this.samples += block.length;
    root.dataset.samples = String(this.samples);
    this.pump();
  }

  onFlushed() {
    this.flushed = true;
    this.media.getTracks().forEach((track) => track.stop()); // the browser's microphone indicator goes off
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
      ui.transcript.textContent = message.text;
    } else if (message.type === "done") {
      this.finished = true;
      ui.transcript.textContent = message.text;
      ui.figures.textContent = message.figures;
      setState("done", "Done. Press Record to start again.");
      this.release();
    } else if (message.type === "error") {
      this.fail(message.message, message.text);
    }
  }

  onClose(event) {
    if (!this.finished) {
      this.fail(`the connection to voicectl mic closed (WebSocket code ${event.code}) before the transcript was ` +
        "complete: check that voicectl mic is still running, then press Record again");
    }
  }

  // Shows one error and leaves it there: the recording is over, nothing is retried behind the user's back.
  fail(message, text) {
    if (this.finished) return;
    this.finished = true;
    if (text) ui.transcript.textContent = text;
    ui.error.textContent = message;
    setState("error", "Stopped by the error below. Press Record to try again.");
    this.release();
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
  ui.figures.textContent = "";
  ui.error.textContent = "";
  const recording = new Recording();
  current = recording;
  recording.start().catch((error) => recording.fail(describeStartError(error)));
});
ui.stop.addEventListener("click", () => current && current.stop());
// Leaving or reloading the page ends the recording as soon as the navigation starts, not when the next page has
// loaded: the server then closes the stream to the endpoint (closing a tab closes the socket in any case).
window.addEventListener("beforeunload", () => current && current.release());
setState("idle", "Press Record and speak.");
