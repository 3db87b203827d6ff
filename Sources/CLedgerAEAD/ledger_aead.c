#include "ledger_aead.h"

#include <errno.h>
#include <stdlib.h>
#include <sys/random.h>
#include <sys/types.h>

// The functions of swift-crypto's BoringSSL used here (include/CCryptoBoringSSL_aead.h and
// CCryptoBoringSSL_aes.h there), declared as BoringSSL declares them.
typedef struct evp_aead_st EVP_AEAD;
typedef struct evp_aead_ctx_st EVP_AEAD_CTX;
const EVP_AEAD *CCryptoBoringSSL_EVP_aead_aes_256_gcm(void);
const EVP_AEAD *CCryptoBoringSSL_EVP_aead_aes_256_gcm_siv(void);
EVP_AEAD_CTX *CCryptoBoringSSL_EVP_AEAD_CTX_new(const EVP_AEAD *aead, const uint8_t *key, size_t key_len, size_t tag_len);
void CCryptoBoringSSL_EVP_AEAD_CTX_free(EVP_AEAD_CTX *ctx);
int CCryptoBoringSSL_EVP_AEAD_CTX_seal(const EVP_AEAD_CTX *ctx, uint8_t *out, size_t *out_len, size_t max_out_len, const uint8_t *nonce,
                                       size_t nonce_len, const uint8_t *in, size_t in_len, const uint8_t *ad, size_t ad_len);
int CCryptoBoringSSL_EVP_AEAD_CTX_open(const EVP_AEAD_CTX *ctx, uint8_t *out, size_t *out_len, size_t max_out_len, const uint8_t *nonce,
                                       size_t nonce_len, const uint8_t *in, size_t in_len, const uint8_t *ad, size_t ad_len);

struct aes_key_st {
    uint32_t rd_key[4 * (14 + 1)];
    unsigned rounds;
};
int CCryptoBoringSSL_AES_set_encrypt_key(const uint8_t *key, unsigned bits, struct aes_key_st *aeskey);
void CCryptoBoringSSL_AES_encrypt(const uint8_t *in, uint8_t *out, const struct aes_key_st *key);

enum { TAG_LENGTH = 16, NONCE_LENGTH = 12 };

ledger_aead *ledger_aead_new(int kind, const uint8_t key[32]) {
    const EVP_AEAD *aead = kind == LEDGER_AEAD_AES_256_GCM ? CCryptoBoringSSL_EVP_aead_aes_256_gcm()
                           : kind == LEDGER_AEAD_AES_256_GCM_SIV ? CCryptoBoringSSL_EVP_aead_aes_256_gcm_siv()
                                                                   : NULL;
    if (aead == NULL) return NULL;
    return (ledger_aead *)CCryptoBoringSSL_EVP_AEAD_CTX_new(aead, key, 32, TAG_LENGTH);
}

void ledger_aead_free(ledger_aead *aead) { CCryptoBoringSSL_EVP_AEAD_CTX_free((EVP_AEAD_CTX *)aead); }

int ledger_aead_seal(const ledger_aead *aead, uint8_t *out, const uint8_t nonce[12], const uint8_t *in, size_t in_len,
                     const uint8_t *ad, size_t ad_len) {
    size_t written = 0;
    return CCryptoBoringSSL_EVP_AEAD_CTX_seal((const EVP_AEAD_CTX *)aead, out, &written, in_len + TAG_LENGTH, nonce, NONCE_LENGTH, in,
                                              in_len, ad, ad_len) == 1 &&
           written == in_len + TAG_LENGTH;
}

int ledger_aead_open(const ledger_aead *aead, uint8_t *out, const uint8_t nonce[12], const uint8_t *in, size_t in_len,
                     const uint8_t *ad, size_t ad_len) {
    if (in_len < TAG_LENGTH) return 0;
    size_t written = 0;
    return CCryptoBoringSSL_EVP_AEAD_CTX_open((const EVP_AEAD_CTX *)aead, out, &written, in_len - TAG_LENGTH, nonce, NONCE_LENGTH, in,
                                              in_len, ad, ad_len) == 1 &&
           written == in_len - TAG_LENGTH;
}

struct ledger_block_key {
    struct aes_key_st key;
};

ledger_block_key *ledger_block_key_new(const uint8_t key[32]) {
    ledger_block_key *block = malloc(sizeof *block);
    if (block != NULL && CCryptoBoringSSL_AES_set_encrypt_key(key, 256, &block->key) != 0) {
        free(block);
        return NULL;
    }
    return block;
}

void ledger_block_key_free(ledger_block_key *key) { free(key); }

void ledger_block_encrypt(const ledger_block_key *key, const uint8_t in[16], uint8_t out[16]) {
    CCryptoBoringSSL_AES_encrypt(in, out, &key->key);
}

// SHA-256 (include/CCryptoBoringSSL_sha2.h there). The state is opaque here: BoringSSL's
// `SHA256_CTX` takes 112 bytes today; the room below leaves it space to grow.
struct sha256_state_st;
int CCryptoBoringSSL_SHA256_Init(struct sha256_state_st *sha);
int CCryptoBoringSSL_SHA256_Update(struct sha256_state_st *sha, const void *data, size_t len);
int CCryptoBoringSSL_SHA256_Final(uint8_t out[32], struct sha256_state_st *sha);

void ledger_sha256(const void *first, size_t first_len, const void *second, size_t second_len, void *out) {
    _Alignas(16) uint8_t room[512];
    struct sha256_state_st *state = (struct sha256_state_st *)room;
    CCryptoBoringSSL_SHA256_Init(state);
    if (first_len > 0) CCryptoBoringSSL_SHA256_Update(state, first, first_len);
    if (second_len > 0) CCryptoBoringSSL_SHA256_Update(state, second, second_len);
    CCryptoBoringSSL_SHA256_Final((uint8_t *)out, state);
}

int ledger_random_bytes(void *out, size_t count) {
    uint8_t *bytes = (uint8_t *)out;
    while (count > 0) {
        ssize_t got = getrandom(bytes, count, 0);
        if (got < 0) {
            if (errno == EINTR) continue;
            return 0;
        }
        bytes += got;
        count -= (size_t)got;
    }
    return 1;
}
