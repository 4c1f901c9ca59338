//! Prompt blocks and the prefix indexes built on them.
//!
//! A prompt is cut into blocks of [`BLOCK_TOKENS`] tokens, each named by a hash chained over
//! the blocks before it and seeded with the target model, as the endpoint picker's
//! approximate-prefix producer does (`approximateprefix/hashing.go`: the model, then each
//! block's content with the previous block's hash). A simulated prompt has no text: its
//! content is "block `i` of the shared prefix `p`" while inside a prefix several requests
//! share, and "block `i` of request `r`" after it, which gives the same equalities text
//! would. [`Lru`] is the bounded, least-recently-used set both the picker's index (one per
//! server, `defaultLRUCapacityPerServer` blocks) and the simulated server's cache use.
//!
//! Knows nothing of servers, scoring or time.

use std::collections::{BTreeMap, HashMap};

/// Tokens per block: the endpoint picker's `defaultBlockSizeTokens` and vLLM's block size.
pub const BLOCK_TOKENS: u32 = 16;

/// The most leading blocks the picker hashes (`defaultMaxPrefixBlocks`).
pub const MAX_PREFIX_BLOCKS: usize = 256;

/// The picker's index capacity per server, in blocks (`defaultLRUCapacityPerServer`).
pub const PICKER_LRU_BLOCKS: usize = 31_250;

/// One block's name.
pub type BlockHash = u64;

/// FNV-1a over a few words: small, stable across platforms and releases.
fn fnv(words: &[u64; 4]) -> u64 {
    let mut bytes = [0u8; 32];
    for (chunk, word) in bytes.chunks_exact_mut(8).zip(words) {
        chunk.copy_from_slice(&word.to_le_bytes());
    }
    tessera_model::fnv::fnv64(&bytes)
}

/// A string's stable identity for hashing.
pub fn name_hash(name: &str) -> u64 {
    tessera_model::fnv::fnv64(name.as_bytes())
}

/// What a prompt is made of, for hashing: a shared prefix (by name and length) and the rest,
/// unique to the request.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct PromptShape<'a> {
    pub model: &'a str,
    pub prefix: Option<&'a str>,
    pub prefix_tokens: u32,
    pub prompt_tokens: u32,
    /// The request's own identity (its index in the trace).
    pub request: u64,
}

/// The hashes of a prompt's full blocks, chained from the model's name, at most
/// `max_blocks` of them. A trailing partial block has no hash: nothing can share it.
pub fn block_hashes(shape: PromptShape<'_>, max_blocks: usize) -> Vec<BlockHash> {
    let full = (shape.prompt_tokens / BLOCK_TOKENS) as usize;
    let shared = match shape.prefix {
        Some(_) => (shape.prefix_tokens.min(shape.prompt_tokens) / BLOCK_TOKENS) as usize,
        None => 0,
    };
    let prefix = shape.prefix.map_or(0, name_hash);
    let mut previous = name_hash(shape.model);
    (0..full.min(max_blocks))
        .map(|i| {
            let content = if i < shared {
                [1, prefix, i as u64]
            } else {
                [2, shape.request, i as u64]
            };
            previous = fnv(&[content[0], content[1], content[2], previous]);
            previous
        })
        .collect()
}

/// Characters per block when a prompt is text: [`BLOCK_TOKENS`] at the picker's
/// `averageCharactersPerToken` of 4.
pub const BLOCK_CHARS: usize = BLOCK_TOKENS as usize * 4;

/// A text prompt's blocks as upstream's `hashPrompt` cuts them: [`BLOCK_CHARS`]-byte chunks
/// chained from the model's name, at most `max_blocks` chunks' worth of text. Returns the full
/// blocks' hashes and, apart, the trailing partial block's (which the picker indexes and a
/// server's cache never holds). A prompt shorter than one block has none.
pub fn text_block_hashes(
    model: &str,
    text: &str,
    max_blocks: usize,
) -> (Vec<BlockHash>, Option<BlockHash>) {
    let bytes = text.as_bytes();
    if bytes.len() < BLOCK_CHARS {
        return (Vec::new(), None);
    }
    let bytes = &bytes[..bytes.len().min(BLOCK_CHARS.saturating_mul(max_blocks))];
    let mut previous = name_hash(model);
    let mut chain = |chunk: &[u8]| {
        let mut input = chunk.to_vec();
        input.extend_from_slice(&previous.to_le_bytes());
        previous = tessera_model::fnv::fnv64(&input);
        previous
    };
    let full: Vec<BlockHash> = bytes.chunks_exact(BLOCK_CHARS).map(&mut chain).collect();
    let rest = bytes.chunks_exact(BLOCK_CHARS).remainder();
    let partial = (!rest.is_empty()).then(|| chain(rest));
    (full, partial)
}

/// A bounded set of block hashes that forgets the least recently touched first.
#[derive(Debug, Clone, Default)]
pub struct Lru {
    capacity: usize,
    clock: u64,
    stamps: HashMap<BlockHash, u64>,
    order: BTreeMap<u64, BlockHash>,
}

impl Lru {
    pub fn new(capacity: usize) -> Lru {
        Lru {
            capacity,
            ..Lru::default()
        }
    }

    pub fn len(&self) -> usize {
        self.stamps.len()
    }

    pub fn is_empty(&self) -> bool {
        self.stamps.is_empty()
    }

    pub fn contains(&self, hash: BlockHash) -> bool {
        self.stamps.contains_key(&hash)
    }

    /// Adds or refreshes a hash; returns the hash evicted to make room, if any.
    pub fn touch(&mut self, hash: BlockHash) -> Option<BlockHash> {
        if self.capacity == 0 {
            return None;
        }
        self.clock += 1;
        if let Some(old) = self.stamps.insert(hash, self.clock) {
            self.order.remove(&old);
            self.order.insert(self.clock, hash);
            return None;
        }
        self.order.insert(self.clock, hash);
        if self.stamps.len() > self.capacity {
            return self.pop_oldest();
        }
        None
    }

    /// Removes a hash; true when it was there.
    pub fn remove(&mut self, hash: BlockHash) -> bool {
        match self.stamps.remove(&hash) {
            Some(stamp) => {
                self.order.remove(&stamp);
                true
            }
            None => false,
        }
    }

    /// Removes and returns the least recently touched hash.
    pub fn pop_oldest(&mut self) -> Option<BlockHash> {
        let (_, hash) = self.order.pop_first()?;
        self.stamps.remove(&hash);
        Some(hash)
    }

    /// How many of `blocks`, counted from the first, are in the set.
    pub fn leading_matches(&self, blocks: &[BlockHash]) -> usize {
        blocks.iter().take_while(|b| self.contains(**b)).count()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn shape(prefix: Option<&'static str>, prompt: u32, request: u64) -> PromptShape<'static> {
        PromptShape {
            model: "llama",
            prefix,
            prefix_tokens: 64,
            prompt_tokens: prompt,
            request,
        }
    }

    #[test]
    fn blocks_inside_a_shared_prefix_are_equal_across_requests_and_differ_after_it() {
        let a = block_hashes(shape(Some("sys-1"), 100, 1), MAX_PREFIX_BLOCKS);
        let b = block_hashes(shape(Some("sys-1"), 100, 2), MAX_PREFIX_BLOCKS);
        let c = block_hashes(shape(Some("sys-2"), 100, 1), MAX_PREFIX_BLOCKS);
        assert_eq!(a.len(), 6, "100 tokens make 6 full blocks of 16");
        assert_eq!(a[..4], b[..4], "64 shared tokens are 4 shared blocks");
        assert_ne!(a[4], b[4]);
        assert_ne!(a[0], c[0], "another prefix");
        let other_model = block_hashes(
            PromptShape {
                model: "mistral",
                ..shape(Some("sys-1"), 100, 1)
            },
            MAX_PREFIX_BLOCKS,
        );
        assert_ne!(
            a[0], other_model[0],
            "the chain starts from the model's name"
        );
    }

    #[test]
    fn hashing_stops_at_the_block_limit_and_ignores_a_partial_block() {
        assert_eq!(block_hashes(shape(None, 15, 1), 256).len(), 0);
        assert_eq!(block_hashes(shape(None, 16 * 300, 1), 256).len(), 256);
        let unshared_a = block_hashes(shape(None, 64, 1), 256);
        let unshared_b = block_hashes(shape(None, 64, 2), 256);
        assert!(unshared_a.iter().all(|h| !unshared_b.contains(h)));
    }

    #[test]
    fn text_prompts_share_blocks_while_their_text_agrees() {
        let system = "You are a helpful assistant. ".repeat(8);
        let a = format!("{system}What is a GPU, and why do we need so many?");
        let b = format!("{system}Why is the sky blue? Tell me at length, please.");
        let (a_full, a_partial) = text_block_hashes("llama", &a, MAX_PREFIX_BLOCKS);
        let (b_full, _) = text_block_hashes("llama", &b, MAX_PREFIX_BLOCKS);
        assert_eq!(system.len(), 232);
        assert_eq!(a_full.len(), a.len() / BLOCK_CHARS);
        assert_eq!(a_full[..3], b_full[..3], "the first 192 bytes are the same");
        assert_ne!(a_full[3], b_full[3]);
        assert!(a_partial.is_some());
        assert_eq!(text_block_hashes("llama", "short", 256), (Vec::new(), None));
        let (other_model, _) = text_block_hashes("sql-adapter", &a, MAX_PREFIX_BLOCKS);
        assert_ne!(other_model[0], a_full[0]);
        let (capped, partial) = text_block_hashes("llama", &"x".repeat(10_000), 2);
        assert_eq!(
            (capped.len(), partial),
            (2, None),
            "hashing stops at the limit"
        );
    }

    #[test]
    fn the_lru_forgets_the_least_recently_touched_and_counts_leading_matches() {
        let mut lru = Lru::new(3);
        assert_eq!(lru.touch(1), None);
        assert_eq!(lru.touch(2), None);
        assert_eq!(lru.touch(3), None);
        assert_eq!(lru.touch(1), None, "refreshing evicts nothing");
        assert_eq!(lru.touch(4), Some(2), "2 is now the oldest");
        assert_eq!(lru.len(), 3);
        assert_eq!(lru.leading_matches(&[1, 3, 2, 4]), 2);
        assert!(lru.remove(3));
        assert!(!lru.remove(3));
        assert_eq!(lru.pop_oldest(), Some(1));
        assert_eq!(Lru::new(0).touch(9), None, "a zero capacity keeps nothing");
    }
}
