/*
 * placement.c -- physical page placement's one exported function: the
 * placement.h mix behind the public API, so that the Python tests compare it
 * with sim/reference.py's place_line bit for bit.  The engine itself calls
 * the inline kvsimPlaceLine (engine.c doMemoryT and walkCost, tlb.c).
 */
#include "engine.h"
#include "placement.h"

uint64_t kvsimPlacedLine(uint64_t line, uint32_t line_bits, uint32_t place_bits,
                         uint64_t place_seed) {
    return kvsimPlaceLine(line, line_bits, place_bits, place_seed);
}
