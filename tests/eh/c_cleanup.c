/* tests/eh/c_cleanup.c - C frames built with -fexceptions: a cleanup
 * (GCC's __attribute__((cleanup))) whose personality routine is the C one,
 * __gcc_personality_v0, so trapkit's throw runtime hands the exception to
 * libgcc at this frame. */
static void run_cleanup(int **flag)
{
    **flag += 1;
}

void c_call_with_cleanup(void (*fn)(void *), void *arg, int *cleaned)
{
    int *guard __attribute__((cleanup(run_cleanup))) = cleaned;
    fn(arg);
    __asm__ volatile("" ::: "memory"); /* not a tail call */
}
