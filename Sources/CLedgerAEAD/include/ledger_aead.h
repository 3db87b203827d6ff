// AES-256-GCM, AES-256-GCM-SIV and the AES-256 block function with keys set up once, and
// SHA-256 without an allocation, from the BoringSSL that swift-crypto builds and links (its
// symbols carry the CCryptoBoringSSL_ prefix); and the system's random bytes in one call. swift-crypto's own API sets a key up again on every call, which costs about ten
// times the sealing of a small value (BENCHMARKS.md, "Encryption at rest").
#ifndef LEDGER_AEAD_H
#define LEDGER_AEAD_H

#include <stddef.h>
#include <stdint.h>

typedef struct ledger_aead ledger_aead;

enum ledger_aead_kind { LEDGER_AEAD_AES_256_GCM = 1, LEDGER_AEAD_AES_256_GCM_SIV = 2 };

/// A context for `kind` under the 32-byte `key`, or NULL when it cannot be made.
ledger_aead *ledger_aead_new(int kind, const uint8_t key[32]);
void ledger_aead_free(ledger_aead *aead);

/// Seals `in` into `out` (room for in_len + 16): ciphertext then the 16-byte tag. 1 on success.
int ledger_aead_seal(const ledger_aead *aead, uint8_t *out, const uint8_t nonce[12], const uint8_t *in, size_t in_len,
                     const uint8_t *ad, size_t ad_len);

/// Opens `in` (ciphertext then tag) into `out` (room for in_len - 16). 1 when it authenticates.
int ledger_aead_open(const ledger_aead *aead, uint8_t *out, const uint8_t nonce[12], const uint8_t *in, size_t in_len,
                     const uint8_t *ad, size_t ad_len);

typedef struct ledger_block_key ledger_block_key;

/// AES-256 encryption of single blocks under the 32-byte `key`.
ledger_block_key *ledger_block_key_new(const uint8_t key[32]);
void ledger_block_key_free(ledger_block_key *key);
void ledger_block_encrypt(const ledger_block_key *key, const uint8_t in[16], uint8_t out[16]);

/// SHA-256 of `first` followed by `second` (either may be empty) into the 32 bytes at `out`, its
/// state on the stack: swift-crypto's `SHA256` allocates a context for every hash and another
/// to finalize, which costs more than hashing an event's header.
void ledger_sha256(const void *first, size_t first_len, const void *second, size_t second_len, void *out);

/// Fills `count` bytes at `out` from the system's random source (`getrandom`, one call for up
/// to 256 bytes). 1 on success, 0 when the source fails.
int ledger_random_bytes(void *out, size_t count);

#endif
