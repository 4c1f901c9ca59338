//! A simulated vLLM server: continuous batching over a paged KV cache with automatic prefix
//! caching and multi-LoRA, stepped on a clock the caller owns.
//!
//! Each step the scheduler keeps the running batch decoding (one token per sequence, a new
//! KV block every [`BLOCK_TOKENS`] tokens; when none is free the most recently admitted
//! sequence is preempted and recomputed later, as vLLM's recompute preemption does), then
//! admits queued requests first come, first served while sequences, blocks and adapter slots
//! allow (a request whose adapter cannot join the batch is passed over, one that finds no
//! blocks stops admission), and fills the step's token budget with prompt chunks (chunked
//! prefill). A prompt's leading blocks found in the cache are not computed again. A step
//! lasts a fixed cost plus a cost per decoding sequence, per prompt token computed and per
//! adapter loaded; its tokens appear when it ends — the first one when a prompt is done.
//!
//! Knows nothing of routing, of other servers or of wall time.

use std::collections::{BTreeSet, HashMap, VecDeque};

use crate::metrics::EndpointMetrics;
use crate::prefix::{BLOCK_TOKENS, BlockHash, Lru};

/// The server's size and speed.
#[derive(Debug, Clone, PartialEq)]
pub struct EngineConfig {
    /// Sequences in the running batch at most (`--max-num-seqs`).
    pub max_num_seqs: u32,
    /// Tokens computed per step at most (`--max-num-batched-tokens`).
    pub max_batched_tokens: u32,
    /// KV-cache blocks of [`BLOCK_TOKENS`] tokens.
    pub kv_blocks: u32,
    /// Adapters in one batch at most (`--max-loras`).
    pub max_loras: u32,
    /// A step's fixed cost, µs.
    pub step_base_us: f64,
    /// Each decoding sequence's cost per step, µs.
    pub decode_us_per_seq: f64,
    /// Each prompt token's cost, µs.
    pub prefill_us_per_token: f64,
    /// Loading an adapter not among the last `max_loras` used, µs.
    pub lora_load_us: f64,
}

impl Default for EngineConfig {
    /// An 8B model on one H100-class GPU with a 64k-token cache (the rest of the memory held
    /// by weights and activations), vLLM's chunked-prefill budget and 4 adapter slots.
    fn default() -> EngineConfig {
        EngineConfig {
            max_num_seqs: 128,
            max_batched_tokens: 8192,
            kv_blocks: 4096,
            max_loras: 4,
            step_base_us: 8_000.0,
            decode_us_per_seq: 80.0,
            prefill_us_per_token: 60.0,
            lora_load_us: 25_000.0,
        }
    }
}

/// A request handed to a server.
#[derive(Debug, Clone, PartialEq)]
pub struct Job {
    /// The caller's name for the request (its index in a trace).
    pub id: usize,
    /// The adapter asked for; None for the base model.
    pub adapter: Option<String>,
    pub prompt_tokens: u32,
    pub output_tokens: u32,
    /// The prompt's full blocks' hashes.
    pub blocks: Vec<BlockHash>,
}

/// What a step's end brought.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Outcome {
    /// The request's first output token.
    FirstToken { id: usize },
    /// The request's last output token.
    Finished { id: usize },
}

/// Totals over the server's life.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct EngineStats {
    /// Prompt tokens of admitted requests (recomputations included).
    pub prompt_tokens: u64,
    /// Of those, the tokens found in the prefix cache.
    pub cached_tokens: u64,
    pub preemptions: u64,
    pub steps: u64,
}

#[derive(Debug, Clone)]
struct Sequence {
    job: Job,
    /// Output tokens made before a preemption, recomputed with the prompt.
    resumed: u32,
    computed: u32,
    generated: u32,
    first_token_sent: bool,
    private_blocks: u32,
}

impl Sequence {
    fn prefill_target(&self) -> u32 {
        self.job.prompt_tokens + self.resumed
    }

    fn prefilling(&self) -> bool {
        self.computed < self.prefill_target()
    }
}

#[derive(Debug, Clone, Default)]
struct Step {
    /// (sequence id, prompt tokens computed this step).
    prefill: Vec<(usize, u32)>,
    decode: Vec<usize>,
}

/// One server.
#[derive(Debug, Clone)]
pub struct Engine {
    config: EngineConfig,
    waiting: VecDeque<Sequence>,
    running: Vec<Sequence>,
    /// Cached blocks in use, with how many sequences hold each.
    held: HashMap<BlockHash, u32>,
    /// Cached blocks no sequence holds, kept until their space is needed.
    idle: Lru,
    /// Blocks holding partial prompt blocks and output.
    private: u32,
    adapters_loaded: Lru,
    step: Option<Step>,
    stats: EngineStats,
}

impl Engine {
    pub fn new(config: EngineConfig) -> Engine {
        Engine {
            idle: Lru::new(usize::MAX),
            adapters_loaded: Lru::new(config.max_loras.max(1) as usize),
            config,
            waiting: VecDeque::new(),
            running: Vec::new(),
            held: HashMap::new(),
            private: 0,
            step: None,
            stats: EngineStats::default(),
        }
    }

    pub fn config(&self) -> &EngineConfig {
        &self.config
    }

    pub fn stats(&self) -> EngineStats {
        self.stats
    }

    /// Whether a step is under way.
    pub fn stepping(&self) -> bool {
        self.step.is_some()
    }

    /// Whether the server has nothing to do.
    pub fn idle(&self) -> bool {
        self.waiting.is_empty() && self.running.is_empty()
    }

    /// Queues a request.
    pub fn enqueue(&mut self, job: Job) {
        self.waiting.push_back(Sequence {
            job,
            resumed: 0,
            computed: 0,
            generated: 0,
            first_token_sent: false,
            private_blocks: 0,
        });
    }

    /// The load the server reports.
    pub fn metrics(&self) -> EndpointMetrics {
        let adapters = |seqs: &mut dyn Iterator<Item = &Sequence>| -> BTreeSet<String> {
            seqs.filter_map(|s| s.job.adapter.clone()).collect()
        };
        EndpointMetrics {
            waiting: self.waiting.len() as u32,
            running: self.running.len() as u32,
            kv_cache_usage: if self.config.kv_blocks == 0 {
                0.0
            } else {
                f64::from(self.used_blocks()) / f64::from(self.config.kv_blocks)
            },
            active_adapters: adapters(&mut self.running.iter()),
            waiting_adapters: adapters(&mut self.waiting.iter()),
            max_adapters: self.config.max_loras,
        }
    }

    fn used_blocks(&self) -> u32 {
        self.held.len() as u32 + self.private
    }

    fn unoccupied_blocks(&self) -> u32 {
        self.config
            .kv_blocks
            .saturating_sub(self.used_blocks() + self.idle.len() as u32)
    }

    /// Claims one block's space, evicting the oldest idle cached block if need be.
    fn take_space(&mut self) -> bool {
        self.unoccupied_blocks() > 0 || self.idle.pop_oldest().is_some()
    }

    fn hold(&mut self, block: BlockHash) -> bool {
        if let Some(count) = self.held.get_mut(&block) {
            *count += 1;
            return true;
        }
        if self.idle.remove(block) || self.take_space() {
            self.held.insert(block, 1);
            return true;
        }
        false
    }

    fn cached(&self, block: BlockHash) -> bool {
        self.held.contains_key(&block) || self.idle.contains(block)
    }

    /// Gives back a sequence's blocks; computed prompt blocks stay cached.
    fn release(&mut self, seq: &Sequence) {
        let computed_blocks = (seq.computed / BLOCK_TOKENS) as usize;
        for (i, block) in seq.job.blocks.iter().enumerate() {
            if let Some(count) = self.held.get_mut(block) {
                *count -= 1;
                if *count == 0 {
                    self.held.remove(block);
                    if i < computed_blocks {
                        self.idle.touch(*block);
                    }
                }
            }
        }
        self.private -= seq.private_blocks;
    }

    /// Admits a queued sequence if its blocks fit: the cached leading blocks are held, the
    /// rest claimed. Returns false (taking nothing) when they do not fit.
    fn admit(&mut self, seq: &mut Sequence) -> bool {
        let target = seq.prefill_target();
        let blocks = &seq.job.blocks;
        let hits_in_idle = blocks.iter().filter(|b| self.idle.contains(**b)).count() as u32;
        let new_blocks = blocks
            .iter()
            .filter(|b| !self.cached(**b))
            .collect::<BTreeSet<_>>()
            .len() as u32;
        // The partial last prompt block, or the first output token's block.
        let private = target.div_ceil(BLOCK_TOKENS) - blocks.len() as u32;
        let reclaimable = self.unoccupied_blocks() + (self.idle.len() as u32 - hits_in_idle);
        if new_blocks + private.max(1) > reclaimable {
            return false;
        }
        let leading = blocks.iter().take_while(|b| self.cached(**b)).count() as u32;
        // Hits first, so claiming space cannot evict them.
        let (hits, misses): (Vec<BlockHash>, Vec<BlockHash>) =
            blocks.iter().partition(|b| self.cached(**b));
        for block in hits.into_iter().chain(misses) {
            let held = self.hold(block);
            debug_assert!(held, "space was counted");
        }
        for _ in 0..private {
            if self.take_space() {
                self.private += 1;
                seq.private_blocks += 1;
            }
        }
        // At least the last token is computed, as vLLM recomputes a fully cached prompt's.
        seq.computed = (leading * BLOCK_TOKENS).min(target.saturating_sub(1));
        self.stats.prompt_tokens += u64::from(target);
        self.stats.cached_tokens += u64::from(seq.computed);
        true
    }

    /// Preempts the most recently admitted sequence other than `keep`. False when there is
    /// none.
    fn preempt_newest(&mut self, keep: usize) -> bool {
        let Some(victim) = self.running.iter().rposition(|s| s.job.id != keep) else {
            return false;
        };
        self.preempt(victim);
        true
    }

    /// Preempts the running sequence at `index`: its blocks go back and it waits at the head
    /// of the queue, to be recomputed with what it had generated.
    fn preempt(&mut self, index: usize) {
        let mut seq = self.running.remove(index);
        self.release(&seq);
        seq.resumed = seq.generated;
        seq.computed = 0;
        seq.private_blocks = 0;
        self.waiting.push_front(seq);
        self.stats.preemptions += 1;
    }

    /// Plans the next step; returns its length in µs, or None when there is nothing to do.
    pub fn start_step(&mut self) -> Option<f64> {
        if self.step.is_some() {
            return None;
        }
        let mut step = Step::default();
        // Decoding sequences first, each needing a new block at a block boundary.
        let mut index = 0;
        while index < self.running.len() {
            let seq = &self.running[index];
            if seq.prefilling() {
                index += 1;
                continue;
            }
            let id = seq.job.id;
            let needs_block = (seq.job.prompt_tokens + seq.generated).is_multiple_of(BLOCK_TOKENS);
            if needs_block {
                if !self.take_space() {
                    if self.preempt_newest(id) {
                        // The victim was after this one or before it: find this one again.
                        index = self
                            .running
                            .iter()
                            .position(|s| s.job.id == id)
                            .unwrap_or(0);
                        continue;
                    }
                    // Alone and out of space: it cannot grow; preempt it too.
                    self.preempt(index);
                    continue;
                }
                self.private += 1;
                self.running[index].private_blocks += 1;
            }
            step.decode.push(id);
            index += 1;
        }
        // Then admissions, first come first served.
        let mut loaded = 0u32;
        let mut passed_over = VecDeque::new();
        while self.running.len() < self.config.max_num_seqs as usize {
            let Some(mut seq) = self.waiting.pop_front() else {
                break;
            };
            if let Some(adapter) = &seq.job.adapter {
                let active: BTreeSet<&String> = self
                    .running
                    .iter()
                    .filter_map(|s| s.job.adapter.as_ref())
                    .collect();
                if !active.contains(adapter) && active.len() >= self.config.max_loras as usize {
                    passed_over.push_back(seq);
                    continue;
                }
            }
            if !self.admit(&mut seq) {
                self.waiting.push_front(seq);
                break;
            }
            if let Some(adapter) = &seq.job.adapter {
                let hash = crate::prefix::name_hash(adapter);
                if !self.adapters_loaded.contains(hash) {
                    loaded += 1;
                }
                self.adapters_loaded.touch(hash);
            }
            self.running.push(seq);
        }
        while let Some(seq) = passed_over.pop_back() {
            self.waiting.push_front(seq);
        }
        // Prompt chunks within the token budget, in admission order.
        let mut budget = self
            .config
            .max_batched_tokens
            .saturating_sub(step.decode.len() as u32);
        for seq in &self.running {
            if budget == 0 {
                break;
            }
            if seq.prefilling() {
                let chunk = (seq.prefill_target() - seq.computed).min(budget);
                budget -= chunk;
                step.prefill.push((seq.job.id, chunk));
            }
        }
        if step.decode.is_empty() && step.prefill.is_empty() {
            return None;
        }
        let prefill_tokens: u32 = step.prefill.iter().map(|(_, t)| t).sum();
        let length = self.config.step_base_us
            + self.config.decode_us_per_seq * step.decode.len() as f64
            + self.config.prefill_us_per_token * f64::from(prefill_tokens)
            + self.config.lora_load_us * f64::from(loaded);
        self.stats.steps += 1;
        self.step = Some(step);
        Some(length)
    }

    /// Ends the step under way: its tokens appear, finished sequences leave.
    pub fn finish_step(&mut self) -> Vec<Outcome> {
        let Some(step) = self.step.take() else {
            return Vec::new();
        };
        let mut outcomes = Vec::new();
        let mut emitted: Vec<usize> = step.decode.clone();
        for (id, chunk) in &step.prefill {
            if let Some(seq) = self.running.iter_mut().find(|s| s.job.id == *id) {
                seq.computed += chunk;
                if !seq.prefilling() {
                    emitted.push(*id);
                }
            }
        }
        for id in emitted {
            let Some(index) = self.running.iter().position(|s| s.job.id == id) else {
                continue;
            };
            let seq = &mut self.running[index];
            seq.generated += 1;
            if !seq.first_token_sent {
                seq.first_token_sent = true;
                outcomes.push(Outcome::FirstToken { id });
            }
            if seq.generated >= seq.job.output_tokens {
                let seq = self.running.remove(index);
                self.release(&seq);
                outcomes.push(Outcome::Finished { id });
            }
        }
        outcomes
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::prefix::{PromptShape, block_hashes};

    fn job(id: usize, prefix: Option<&str>, prompt: u32, output: u32) -> Job {
        Job {
            id,
            adapter: None,
            prompt_tokens: prompt,
            output_tokens: output,
            blocks: block_hashes(
                PromptShape {
                    model: "m",
                    prefix,
                    prefix_tokens: 256,
                    prompt_tokens: prompt,
                    request: id as u64,
                },
                usize::MAX,
            ),
        }
    }

    /// Runs until idle; returns (first token time, finish time) per id, in µs.
    fn run(engine: &mut Engine) -> HashMap<usize, (f64, f64)> {
        let mut now = 0.0;
        let mut times: HashMap<usize, (f64, f64)> = HashMap::new();
        while let Some(length) = engine.start_step() {
            now += length;
            for outcome in engine.finish_step() {
                match outcome {
                    Outcome::FirstToken { id } => times.entry(id).or_default().0 = now,
                    Outcome::Finished { id } => times.entry(id).or_default().1 = now,
                }
            }
        }
        times
    }

    fn small() -> EngineConfig {
        EngineConfig {
            max_num_seqs: 4,
            max_batched_tokens: 512,
            kv_blocks: 64,
            max_loras: 1,
            step_base_us: 1_000.0,
            decode_us_per_seq: 10.0,
            prefill_us_per_token: 1.0,
            lora_load_us: 5_000.0,
        }
    }

    #[test]
    fn a_lone_request_costs_its_prefill_then_one_step_per_token() {
        let mut engine = Engine::new(small());
        engine.enqueue(job(0, None, 300, 3));
        let times = run(&mut engine);
        // Step 1: 300 prompt tokens (first token); steps 2 and 3: one decode each.
        assert_eq!(times[&0], (1_300.0, 1_300.0 + 2.0 * 1_010.0));
        assert!(engine.idle());
        assert_eq!(
            engine.metrics().kv_cache_usage,
            0.0,
            "all blocks given back"
        );
    }

    #[test]
    fn a_long_prompt_is_chunked_by_the_token_budget() {
        let mut engine = Engine::new(small());
        engine.enqueue(job(0, None, 1000, 1));
        let times = run(&mut engine);
        // 512 + 488 tokens over two steps.
        assert_eq!(times[&0].0, 1_512.0 + 1_488.0);
        assert_eq!(engine.stats().steps, 2);
    }

    #[test]
    fn a_shared_prefix_is_computed_once() {
        let mut engine = Engine::new(small());
        engine.enqueue(job(0, Some("sys"), 320, 1));
        run(&mut engine);
        engine.enqueue(job(1, Some("sys"), 320, 1));
        let times = run(&mut engine);
        // 256 of 320 tokens cached: 64 computed.
        assert_eq!(times[&1].0, 1_064.0);
        let stats = engine.stats();
        assert_eq!((stats.prompt_tokens, stats.cached_tokens), (640, 256));
        engine.enqueue(job(2, Some("other"), 320, 1));
        let times = run(&mut engine);
        assert_eq!(times[&2].0, 1_320.0, "another prefix is not cached");
    }

    #[test]
    fn the_batch_and_the_adapters_limit_admission() {
        let mut engine = Engine::new(small());
        for id in 0..5 {
            engine.enqueue(job(id, None, 16, 2));
        }
        engine.start_step();
        let metrics = engine.metrics();
        assert_eq!(
            (metrics.running, metrics.waiting),
            (4, 1),
            "max_num_seqs is 4"
        );

        let mut engine = Engine::new(small());
        let mut a = job(0, None, 16, 2);
        a.adapter = Some("sql".into());
        let mut b = job(1, None, 16, 2);
        b.adapter = Some("chat".into());
        let c = job(2, None, 16, 2);
        for j in [a, b, c] {
            engine.enqueue(j);
        }
        let length = engine.start_step().expect("work");
        let metrics = engine.metrics();
        assert_eq!(
            metrics.running, 2,
            "chat waits for sql's slot; the base model does not"
        );
        assert_eq!(
            metrics.waiting_adapters.iter().collect::<Vec<_>>(),
            ["chat"]
        );
        assert_eq!(metrics.active_adapters.iter().collect::<Vec<_>>(), ["sql"]);
        assert_eq!(length, 1_000.0 + 32.0 + 5_000.0, "one adapter loaded");
    }

    #[test]
    fn running_out_of_blocks_preempts_the_newest_and_recomputes_it() {
        let mut config = small();
        config.kv_blocks = 6;
        let mut engine = Engine::new(config);
        // Each prompt takes 2 blocks and grows by one every 16 tokens.
        engine.enqueue(job(0, None, 32, 40));
        engine.enqueue(job(1, None, 32, 40));
        let times = run(&mut engine);
        assert!(
            engine.stats().preemptions > 0,
            "6 blocks cannot hold both to the end"
        );
        assert_eq!(times.len(), 2, "both finish all the same");
        assert!(times[&0].1 < times[&1].1, "the older one keeps running");
        assert!(engine.idle());
        assert_eq!(engine.metrics().kv_cache_usage, 0.0);
    }

    #[test]
    fn a_request_larger_than_the_cache_waits_without_blocking_forever_the_step_loop() {
        let mut config = small();
        config.kv_blocks = 2;
        let mut engine = Engine::new(config);
        engine.enqueue(job(0, None, 320, 1));
        assert_eq!(
            engine.start_step(),
            None,
            "it never fits, and nothing else runs"
        );
        assert_eq!(engine.metrics().waiting, 1);
    }
}
