// The page: takes a receipt (by round id, pasted, or as a file), verifies it with the pure
// modules beside this one, and shows the verdict and the round. Everything a document holds is
// put on the page as text (textContent), never as markup.

import { findSeat, readRevealedRound } from "./fairness.js";
import { hexOf } from "./bytes.js";
import { parseJson, isObject } from "./json.js";
import { cardLabel, cardName, rankTitle } from "./rules.js";
import { STEPS, UnreadableError, pinnedSizeOf, summaryOf, verifyDocument } from "./receipt.js";
import { parseCheckpoint, parseSignedNote } from "./note.js";
import { TileMismatch, TilesUnavailable, checkAgainstTiles, httpTiles } from "./tiles.js";

const $ = (id) => document.getElementById(id);
const KEY_STORAGE = "gnau-verifier-pinned-vkey";

function element(tag, { className, text, attributes } = {}, ...children) {
  const node = document.createElement(tag);
  if (className) node.className = className;
  if (text !== undefined) node.textContent = text;
  for (const [name, value] of Object.entries(attributes ?? {})) node.setAttribute(name, value);
  node.append(...children);
  return node;
}

// -- the verdict --------------------------------------------------------------------------------

function showVerdict(state, headline, detail = "", step = "") {
  const verdict = $("verdict");
  verdict.dataset.state = state;
  verdict.dataset.step = step;
  verdict.replaceChildren(element("strong", { text: headline }));
  if (detail) verdict.append(element("p", { text: detail }));
}

// What a failed step means, in plain words: the verdict leads with it, the check's own finding
// (hashes, indices) follows under a detail. A fairness failure names its link first ("lock: ...").
const PLAIN_WORDS = {
  commitment: "The server's seed does not match the commitment it showed before the bets: the shuffle may have been chosen after them.",
  lock: "The stakes or seats were changed after the cards were shuffled.",
  deck: "The deck is not the one the committed seed and the locked seats produce: the cards were not shuffled as promised.",
  hand: "A hand is not what the committed deck deals: cards were swapped.",
  fairness: "The round's own record does not recompute: it was changed after it was dealt.",
  entries: "The round's log entries are not signed by the log key you trust, or were altered.",
  round: "The round differs from what the casino's signed log says of it.",
  outcome: "The settlement is not what the rules give for these hands: money was moved wrongly.",
  checkpoint: "The log's signed checkpoint does not verify with the keys you trust.",
  inclusion: "The round's entries are not in the log's signed tree: the log may show others another history.",
  consistency: "The log no longer holds what it held when you kept your checkpoint: its history was rewritten.",
};

function plainWords(failure) {
  const link = failure.step === "fairness" ? failure.reason.split(":")[0].split(" ")[0] : "";
  return PLAIN_WORDS[link] ?? PLAIN_WORDS[failure.step] ?? "A check failed.";
}

function showFailure(failure) {
  showVerdict("invalid", `✗ INVALID at step ${failure.step}`, plainWords(failure), failure.step);
  const finding = element("details", {}, element("summary", { text: "What the check found" }), element("p", { text: failure.reason }));
  $("verdict").append(finding);
}

function showSteps(report) {
  const list = $("steps");
  list.replaceChildren();
  if (!report) return;
  const steps = report.kind === "round" ? ["fairness"] : STEPS;
  for (const step of steps) {
    let state = "not-run";
    let mark = "–";
    if (report.passed.includes(step)) [state, mark] = ["passed", "✓"];
    else if (report.failure?.step === step) [state, mark] = ["failed", "✗"];
    else if (report.unchecked?.step === step) [state, mark] = ["unchecked", "?"];
    else if (step === "consistency" && !report.failure) [state, mark] = ["skipped", "–"];
    const label = { passed: "holds", failed: "fails", unchecked: "cannot check", "not-run": "not run", skipped: "no pinned checkpoint" }[state];
    list.append(element("li", { text: `${mark} ${step}`, attributes: { "data-step": step, "data-state": state, "aria-label": `${step}: ${label}` } }));
  }
}

// -- the log's tiles (docs/audit.md, "Tiles") ---------------------------------------------------

const TILES_CHECK = "inclusion checked against the log's tiles";
let tilesRun = 0; // a newer check supersedes one still fetching

function showTiles(state, text) {
  const line = $("tiles-check");
  line.dataset.state = state;
  line.textContent = text;
  line.hidden = state === "idle";
}

/** The log's own checkpoint beside the page: which log its tiles are. Its signature is not
 * needed: every tile is checked against the receipt's checkpoint, which verified; and its size
 * neither (the tiles of any size the log signed are served, a 404 says when they are not). */
async function tilesOrigin() {
  let response;
  try {
    response = await fetch("log/checkpoint", { cache: "no-store" });
  } catch (error) {
    throw new TilesUnavailable(`log/checkpoint cannot be fetched (${error.message})`);
  }
  if (!response.ok) throw new TilesUnavailable(`log/checkpoint: ${response.status} ${response.statusText}`.trim());
  try {
    return parseCheckpoint(parseSignedNote(await response.text()).text);
  } catch (error) {
    throw new TilesUnavailable(`log/checkpoint is not a checkpoint (${error.message})`);
  }
}

async function checkTiles(report) {
  const run = ++tilesRun;
  if (report?.kind !== "receipt" || !report.tree) {
    showTiles("idle", "");
    return;
  }
  const { tree, leaves } = report;
  if (location.protocol === "file:") {
    showTiles("unavailable", `? ${TILES_CHECK}: not checked. This page was opened from a file, so no log serves tiles beside it.`);
    return;
  }
  showTiles("working", `… checking the receipt against the log's tiles`);
  let state;
  let text;
  try {
    const served = await tilesOrigin();
    if (served.origin !== tree.origin) {
      throw new TilesUnavailable(`the tiles here are of the log ${served.origin}, the receipt's of ${tree.origin}`);
    }
    const read = await checkAgainstTiles({ ...tree, leaves }, httpTiles("log/"));
    [state, text] = ["passed", `✓ ${TILES_CHECK}: the receipt's ${read.entries} entries are the tiles' leaves, and the ${read.tiles} tiles read give the root of its checkpoint of ${tree.size} entries.`];
  } catch (error) {
    if (error instanceof TileMismatch) {
      [state, text] = ["failed", `✗ ${TILES_CHECK}: FAILS. The log's tiles disagree with the receipt: ${error.message}. The log may show others another history.`];
    } else if (error instanceof TilesUnavailable) {
      [state, text] = ["unavailable", `? ${TILES_CHECK}: not checked. The tiles are unavailable: ${error.message}.`];
    } else {
      throw error;
    }
  }
  if (run === tilesRun) showTiles(state, text);
}

async function verifyText(text, origin) {
  showVerdict("working", "Checking…");
  showSteps(null);
  showTiles("idle", "");
  tilesRun += 1;
  $("round-section").hidden = true;
  const vkey = $("vkey").value.trim();
  const pinned = $("pinned-checkpoint").value;
  const witnessVkeys = $("witness-keys").value.split("\n").map((line) => line.trim()).filter(Boolean);
  const quorumText = $("quorum").value.trim();
  const quorum = quorumText === "" ? null : /^[0-9]+$/.test(quorumText) ? Number(quorumText) : Number.NaN;
  let report;
  try {
    report = await verifyDocument(text, { vkeys: vkey ? [vkey] : [], pinnedCheckpoint: pinned.trim() ? pinned : null, witnessVkeys, quorum });
  } catch (error) {
    const reason = error instanceof UnreadableError ? error.message : `this page could not check it (${error})`;
    showVerdict("unreadable", "Cannot check this", `${origin}: ${reason}`);
    showRound(text, null);
    $("verdict").focus();
    return;
  }
  if (report.failure) {
    showFailure(report.failure);
  } else if (report.unchecked) {
    showVerdict(
      "unchecked",
      `? CANNOT CHECK step ${report.unchecked.step}: nothing is known to be wrong`,
      `${report.unchecked.reason}. Every step before it holds: ${report.passed.join(", ")}. Fetch the round by its id with your pinned checkpoint filled in (or run gnau receipt get ${report.roundId} --pin FILE).`,
      report.unchecked.step,
    );
  } else if (report.kind === "round") {
    showVerdict(
      "valid",
      "✓ VALID: the round was dealt fairly",
      "A revealed round on its own: the commitment, lock, deck and every hand recompute. It is not checked against the log (a receipt is).",
    );
  } else {
    const pin = report.pinnedSize === null ? "" : ` It is one history with your pinned checkpoint of ${report.pinnedSize} entries.`;
    const cosigned = report.cosignedBy.length ? ` ${report.cosignedBy.length} of your witnesses cosigned that tree (${report.cosignedBy.join(", ")}).` : "";
    const state = report.state === "voided" ? `voided (${report.voidReason})` : report.state;
    showVerdict(
      "valid",
      `✓ VALID: round ${report.roundId}, ${state}`,
      `Every step holds: ${report.passed.join(", ")}. It stands in the log's signed tree of ${report.checkpointSize} entries.${cosigned}${pin}`,
    );
  }
  $("verdict").title = summaryOf(report);
  showSteps(report);
  showRound(text, report);
  $("verdict").focus();
  await checkTiles(report);
}

// -- the round ----------------------------------------------------------------------------------

function cardView(card, role, points) {
  const tags = [role, points].filter(Boolean);
  const face = element(
    "span",
    { className: `card suit-${card[1]}${role ? ` ${role}` : ""}`, attributes: { role: "img", "aria-label": [cardName(card), ...tags].join(", ") } },
    element("span", { className: "rank", text: cardLabel(card).slice(0, -1), attributes: { "aria-hidden": "true" } }),
    element("span", { className: "suit", text: cardLabel(card).slice(-1), attributes: { "aria-hidden": "true" } }),
  );
  return element("li", { className: "card-slot" }, face, element("span", { className: "card-tag", text: tags.join(" "), attributes: { "aria-hidden": "true" } }));
}

function cardsView(cards, evaluation) {
  const list = element("ul", { className: "cards", attributes: { "aria-label": "cards" } });
  const ox = [...(evaluation?.ox ?? [])];
  const power = [...(evaluation?.power ?? [])];
  cards.forEach((card, position) => {
    let role = "";
    // A card may appear twice with several decks: mark each listed ox or power card once.
    if (ox.includes(card)) {
      role = "ox";
      ox.splice(ox.indexOf(card), 1);
    } else if (power.includes(card)) {
      role = "power";
      power.splice(power.indexOf(card), 1);
    }
    const counted = evaluation && (card[0] === "3" || card[0] === "6") && role ? `as ${evaluation.points[position]}` : "";
    list.append(cardView(card, role, counted));
  });
  return list;
}

const signed = (n) => (n > 0n ? `+${n}` : n < 0n ? `−${-n}` : "0");

function resultView(evaluation, outcome, delta, stake) {
  const result = element("div", { className: "result" });
  if (evaluation) {
    const title = rankTitle(evaluation.rank) + (evaluation.nenku ? " (Nenku)" : "");
    result.append(element("span", { className: "category", text: title }));
  }
  if (stake !== undefined) result.append(element("span", { text: `stake ${stake}` }));
  if (outcome) result.append(element("span", { className: `outcome ${outcome.toLowerCase()}`, text: outcome }));
  if (delta !== undefined) result.append(element("span", { className: "delta", text: `delta ${signed(BigInt(delta))}` }));
  return result;
}

function handView(title, cards, evaluation, { outcome, delta, stake, dealer = false, attributes = {} } = {}) {
  const head = element("div", { className: "hand-head" }, element("h3", { text: title }));
  return element("article", { className: `hand${dealer ? " dealer" : ""}`, attributes: { "aria-label": title, ...attributes } }, head, cardsView(cards, evaluation), resultView(evaluation, outcome, delta, stake));
}

/** Who sits at a seat, as the round names them: the player reference of a v2 or v3 round, the
 *  platform's player id of a v1 round. */
const seatHolder = (seat) => seat.player_ref ?? seat.player_id;

// -- check your seat ----------------------------------------------------------------------------

/** The round on show, and whether it verified: what "check your seat" searches. */
let shownRound = null;

function checkSeat() {
  const status = $("seat-status");
  for (const article of document.querySelectorAll("article.hand.yours")) {
    article.classList.remove("yours");
    article.removeAttribute("aria-current");
  }
  const query = $("seat-query").value;
  if (!shownRound) {
    status.textContent = "Verify a round first: then find your seat in it.";
    return;
  }
  const { round, report } = shownRound;
  const seat = findSeat(round, query);
  status.dataset.found = seat ? "true" : "false";
  if (!seat) {
    status.textContent = `No seat of round ${round.round_id} has the reference or seat number ${JSON.stringify(query.trim())}.`;
    return;
  }
  const article = document.querySelector(`article.hand[data-seat-number="${seat.seat_number}"]`);
  if (article) {
    article.classList.add("yours");
    article.setAttribute("aria-current", "true");
    article.scrollIntoView({ block: "nearest" });
  }
  const settled = report?.settlement?.seats?.find((item) => item.seat === seat.seat_number);
  const verified = report && !report.failure && !report.unchecked;
  const who = seat.player_ref ? `reference ${seat.player_ref}` : `player ${seat.player_id}`;
  const result = settled && report.state !== "voided" ? `: ${settled.outcome}, delta ${signed(BigInt(settled.delta))}` : "";
  const trust = verified
    ? "The round verified, so this seat is as the casino's signed log holds it."
    : "The round did not verify: do not rely on it.";
  status.textContent = `Seat ${seat.seat_number}, ${who}, stake ${seat.stake}${result}. ${trust}`;
}

function factsView(pairs) {
  const list = element("dl", { className: "facts" });
  for (const [name, value] of pairs) list.append(element("dt", { text: name }), element("dd", { text: value }));
  return list;
}

function showRound(text, report) {
  const section = $("round-section");
  const container = $("round");
  container.replaceChildren();
  shownRound = null;
  $("seat-status").textContent = "";
  let round = report?.round ?? null;
  const verified = report && !report.failure && !report.unchecked;
  if (!round) {
    // Not verified: show what the document says, marked as such, if it reads as a round at all.
    try {
      const value = parseJson(text);
      const document = isObject(value) && isObject(value.round) ? value.round : isObject(value?.revealed_round) ? value.revealed_round : value;
      round = readRevealedRound(document);
    } catch {
      round = null;
    }
  }
  if (!round) {
    section.hidden = !(report && report.state === "voided");
    if (!section.hidden) container.append(element("p", { text: "This round was voided before its deal: it has no seats or cards." }));
    return;
  }
  section.hidden = false;
  shownRound = { round, report };
  if (!verified) {
    container.append(element("p", { className: "warning", text: "Shown as the document states it: it did not verify, so do not rely on any of it." }));
  }
  const settlement = verified ? report.settlement : null;
  const rules = round.rules;
  container.append(
    factsView([
      ["Round", round.round_id],
      ["Seats name", round.version === 1 ? "the platform's player ids (fairness v1)" : `player references (fairness v${round.version}): ask the casino for yours`],
      ...(report?.tableId ? [["Table", report.tableId]] : []),
      ...(report?.operator ? [["Operator", report.operator]] : []),
      ...(report?.currency ? [["Currency", `${report.currency.code}: every amount below is in its minor units (${report.currency.exponent} decimal place${report.currency.exponent === 1 ? "" : "s"})`]] : []),
      ...(verified && report?.returnToPlayer ? [["Return to player", `${report.returnToPlayer.rtp} per unit staked (house edge ${report.returnToPlayer.houseEdge}), as disclosed when the round began`]] : []),
      ...(verified && report.state === "voided" && settlement ? [["Voided after the deal", "each seat is paid the better of its result and a refund of its stake (its delta below)"]] : []),
      ["House rules", `${rules.decks} deck${rules.decks > 1 ? "s" : ""}; tie: ${rules.tie}; payout: ${rules.payout}; 10 is a Duke: ${rules.ten_is_duke ? "yes" : "no"}; 3-6 pairs: ${rules.three_six_pair ? "yes" : "no"}; trips make an ox: ${rules.trips_make_ox ? "yes" : "no"}; Five Small: ${rules.five_small ? "yes" : "no"}; suited pays double: ${rules.suited_double ? "yes" : "no"}`],
    ]),
  );
  const hands = element("div", { className: "hands" });
  hands.append(
    handView("Dealer", round.dealer_hand, settlement?.dealer ?? null, { delta: settlement ? settlement.dealerDelta : undefined, dealer: true }),
  );
  const bySeat = new Map((settlement?.seats ?? []).map((seat) => [seat.seat, seat]));
  const handsBySeat = new Map(round.hands.map((hand) => [hand.seat_number, hand.cards]));
  for (const seat of round.seats) {
    const settled = bySeat.get(seat.seat_number);
    const title = `Seat ${seat.seat_number}: ${seatHolder(seat)}`;
    hands.append(
      handView(title, handsBySeat.get(seat.seat_number) ?? [], settled?.evaluation ?? null, {
        stake: seat.stake,
        outcome: report?.state === "voided" ? "" : settled?.outcome,
        delta: settled?.delta,
        attributes: { "data-seat-number": String(seat.seat_number), "data-player": seatHolder(seat) },
      }),
    );
  }
  container.append(hands);
  const details = element("details", {}, element("summary", { text: "Seeds and hashes" }));
  details.append(
    factsView([
      ["Commitment", hexOf(round.commitment)],
      ["Transcript hash", hexOf(round.transcript_hash)],
      ["Server seed", hexOf(round.server_seed)],
      ["Beacon", round.beacon ? `${round.beacon.label}: ${hexOf(round.beacon.value)}` : "none"],
      ...round.seats.map((seat) => [`Client seed, seat ${seat.seat_number}`, hexOf(seat.client_seed) || "none"]),
    ]),
  );
  container.append(details);
}

// -- fetching -----------------------------------------------------------------------------------

async function fetchJson(path) {
  const response = await fetch(path, { headers: { Accept: "application/json" }, cache: "no-store" });
  const text = await response.text();
  if (!response.ok) {
    let reason = `${response.status} ${response.statusText}`;
    try {
      reason = JSON.parse(text).reason ?? reason;
    } catch {
      /* not a JSON refusal: keep the status line */
    }
    const refused = new Error(reason);
    refused.status = response.status;
    throw refused;
  }
  return text;
}

async function fetchReceipt(roundId) {
  $("round-id").value = roundId;
  const pinnedSize = pinnedSizeOf($("pinned-checkpoint").value);
  const query = pinnedSize ? `?pinned_size=${pinnedSize}` : "";
  showVerdict("working", `Fetching the receipt of ${roundId}…`);
  let text;
  try {
    text = await fetchJson(`rounds/${encodeURIComponent(roundId)}/receipt${query}`);
  } catch (error) {
    showVerdict("unreadable", "Cannot fetch the receipt", `${roundId}: ${error.message}`);
    showSteps(null);
    $("round-section").hidden = true;
    return;
  }
  $("receipt-text").value = text;
  await verifyText(text, `the receipt of ${roundId}`);
}

function openRoundFromHash() {
  let roundId;
  try {
    roundId = decodeURIComponent(location.hash.slice(1));
  } catch {
    roundId = location.hash.slice(1); // not percent-encoding: take it as written
  }
  if (roundId) fetchReceipt(roundId);
}

// -- recall -------------------------------------------------------------------------------------

let nextPageToken = "";

async function listRounds(more = false) {
  const table = $("table-id").value.trim();
  const params = new URLSearchParams({ page_size: "10" });
  if (table) params.set("table_id", table);
  if (more && nextPageToken) params.set("page_token", nextPageToken);
  $("recall-status").textContent = "Loading…";
  let page;
  try {
    page = JSON.parse(await fetchJson(`rounds?${params}`));
  } catch (error) {
    if (error.status === 403) {
      // The service lists no rounds to the public (its default): a round id is the way in.
      $("recall-list").replaceChildren();
      nextPageToken = "";
      $("recall-more").hidden = true;
      $("recall-status").textContent = "Listing rounds is off on this service. Paste the round id your platform gave you into Round id above, open #ROUND_ID, or drop a receipt file.";
      return;
    }
    $("recall-status").textContent = `Cannot list rounds: ${error.message}`;
    return;
  }
  const list = $("recall-list");
  if (!more) list.replaceChildren();
  for (const round of page.rounds) {
    const when = String(round.created_at).replace("T", " ").replace(/\.\d+Z$/, " UTC");
    const button = element("button", { text: `${round.round_id} · table ${round.table_id} · ${round.state} · ${when}`, attributes: { type: "button", "data-round-id": round.round_id } });
    button.addEventListener("click", () => {
      if (location.hash === `#${encodeURIComponent(round.round_id)}`) openRoundFromHash();
      else location.hash = encodeURIComponent(round.round_id);
    });
    list.append(element("li", {}, button));
  }
  nextPageToken = page.next_page_token;
  $("recall-more").hidden = !nextPageToken;
  const shown = list.children.length;
  $("recall-status").textContent = shown ? `${shown} revealed round${shown > 1 ? "s" : ""}, newest first. Choose one to verify it.` : "No revealed round yet.";
}

// -- wiring -------------------------------------------------------------------------------------

async function fillKeyFromServer() {
  try {
    const keys = JSON.parse(await fetchJson("keys"));
    $("vkey").value = keys.verifier_keys[0] ?? "";
    rememberKey();
    $("key-warning").hidden = false;
  } catch (error) {
    $("key-warning").hidden = false;
    $("key-warning").textContent = `Cannot fetch the server's key: ${error.message}`;
  }
}

function rememberKey() {
  try {
    localStorage.setItem(KEY_STORAGE, $("vkey").value.trim());
  } catch {
    /* storage refused (a private window): the key is kept for this visit only */
  }
}

async function readDroppedFile(file) {
  const text = await file.text();
  $("receipt-text").value = text;
  await verifyText(text, file.name);
}

function start() {
  try {
    $("vkey").value = localStorage.getItem(KEY_STORAGE) ?? "";
  } catch {
    /* no storage: start empty */
  }
  $("vkey").addEventListener("change", rememberKey);
  $("fetch-form").addEventListener("submit", (event) => {
    event.preventDefault();
    const roundId = $("round-id").value.trim();
    if (!roundId) return;
    if (location.hash === `#${encodeURIComponent(roundId)}`) fetchReceipt(roundId);
    else location.hash = encodeURIComponent(roundId);
  });
  $("verify-pasted").addEventListener("click", () => verifyText($("receipt-text").value, "the pasted text"));
  $("receipt-file").addEventListener("change", (event) => {
    const [file] = event.target.files;
    if (file) readDroppedFile(file);
  });
  const zone = $("drop-zone");
  zone.addEventListener("dragover", (event) => {
    event.preventDefault();
    zone.classList.add("dragging");
  });
  zone.addEventListener("dragleave", () => zone.classList.remove("dragging"));
  zone.addEventListener("drop", (event) => {
    event.preventDefault();
    zone.classList.remove("dragging");
    const [file] = event.dataTransfer.files;
    if (file) readDroppedFile(file);
  });
  $("fetch-key").addEventListener("click", fillKeyFromServer);
  $("recall-form").addEventListener("submit", (event) => {
    event.preventDefault();
    listRounds();
  });
  $("recall-more").addEventListener("click", () => listRounds(true));
  $("seat-form").addEventListener("submit", (event) => {
    event.preventDefault();
    checkSeat();
  });
  window.addEventListener("hashchange", openRoundFromHash);
  openRoundFromHash();
  listRounds();
  document.body.dataset.ready = "true";
}

start();
