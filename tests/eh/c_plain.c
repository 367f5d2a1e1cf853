/* tests/eh/c_plain.c - C frames built without -fexceptions: unwind tables
 * but no personality routine; a C++ exception passes through them. */
void c_call_plain(void (*fn)(void *), void *arg)
{
    fn(arg);
    __asm__ volatile("" ::: "memory"); /* not a tail call */
}
