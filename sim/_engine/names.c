/* names.c -- the names of the engine's enums, exported for sim/_binding.py.
 *
 * Generated from the X-macro lists of engine.h (KVSIM_KINDS, KVSIM_INCLUSIONS),
 * so the enum and its names are one definition; the Python side reads them
 * here instead of repeating them. */
#include "engine.h"

static const char *const KIND_NAME[KVSIM_NKINDS] = {
#define KVSIM_KIND_NAME(id, name) name,
    KVSIM_KINDS(KVSIM_KIND_NAME)
#undef KVSIM_KIND_NAME
};

static const char *const INCLUSION_NAME[KVSIM_NINCLUSIONS] = {
#define KVSIM_INCLUSION_NAME(id, name) name,
    KVSIM_INCLUSIONS(KVSIM_INCLUSION_NAME)
#undef KVSIM_INCLUSION_NAME
};

uint32_t kvsimAccessKindCount(void) { return KVSIM_NKINDS; }

const char *kvsimAccessKindName(uint32_t i) { return i < KVSIM_NKINDS ? KIND_NAME[i] : NULL; }

uint32_t kvsimInclusionCount(void) { return KVSIM_NINCLUSIONS; }

const char *kvsimInclusionName(uint32_t i) {
    return i < KVSIM_NINCLUSIONS ? INCLUSION_NAME[i] : NULL;
}
