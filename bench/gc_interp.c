/* bench/gc_interp.c - a small Scheme interpreter whose every object comes
 * from the collector, running a fixed program: one source for two
 * collectors (built as bench/gcbench.c is: bench/gcwork.h).
 *
 * What a language runtime asks of a collector, beside the synthetic
 * workloads: many small objects of several kinds and lifetimes, pointers
 * from old objects to young ones (a global variable's new value, an
 * association list's counts updated in place, a closure's captured
 * variable), strings that hold no pointers, and C code holding objects in
 * its locals (both collectors scan the stack).
 *
 * The interpreter: a reader (integers, symbols, strings, lists, quote) that
 * builds the program's expressions in the heap; symbols interned in a hash
 * table of association lists (a collector object), each with a slot for
 * its global value; environments as frames of a variable list and a value
 * list (the evaluated arguments themselves) with a parent; closures;
 * primitives as objects; special forms quote, if, define, set!, lambda,
 * let, begin, cond, and, or; tail calls in a loop, not on the C stack.
 * Fixnums are odd words (never an object's address), every other value a
 * pointer to an object whose first word is its type.  Every pointer stored
 * into an object goes through GC_WRITE.
 *
 * The program (kProgram below), run once per round (run i): naive fib 16;
 * 400 random numbers from an LCG in Scheme, merge-sorted; 200 random words
 * made as strings, interned as symbols and counted in an association list
 * (set-cdr! on its entries); the squares of 0..59 joined into a string;
 * a counter closure called 51 times; a tenth of a long-lived table of 4,000
 * entries (an association list built at the start) given new values
 * (set-cdr!: old pairs pointed at new ones); the round's results kept in a
 * global list of the last 9 (set!: an old symbol's slot pointed at new
 * pairs).
 *
 *   gc_interp [--incremental] [--pauses] [--scale F]
 *
 * --scale F: F times 40 rounds (some 400 MB allocated).  Prints gcwork.h's
 * JSON object with scale and checksum (a hash of each round's result as
 * printed, of what the program displayed, and of the table and the last
 * results at the end: the same on both collectors).  Checked: each round's
 * results against the same figures computed in C (fib, the random numbers'
 * sum, the counts, the string's length, the entries refreshed); a wrong one
 * exits 1.
 */
#define _GNU_SOURCE
#include <stdarg.h>
#include <stdint.h>

#include "gcwork.h"

#define STORE GCW_STORE

enum { kRounds = 40, kBuckets = 256 };

typedef struct Obj {
    uintptr_t type;
} Obj;
typedef Obj *V;

enum { T_PAIR = 1, T_SYMBOL, T_STRING, T_CLOSURE, T_PRIM, T_FRAME, T_SPECIAL };

typedef struct {
    uintptr_t type;
    V car, cdr;
} Pair;
typedef struct {
    uintptr_t type;
    V name;  /* a string */
    V value; /* its global value, or unbound */
} Symbol;
typedef struct {
    uintptr_t type;
    size_t len;
    char s[]; /* (no pointers: the object is atomic) */
} String;
typedef struct {
    uintptr_t type;
    V params, body, env; /* body: a list of expressions */
} Closure;
typedef struct {
    uintptr_t type;
    V (*fn)(V args);
    const char *name; /* a C string constant */
} Prim;
typedef struct {
    uintptr_t type;
    V vars, vals, parent; /* vals: the list of arguments itself */
} Frame;
typedef struct {
    uintptr_t type;
    const char *name; /* "()", "#t", "#f", "#<unspecified>", "#<unbound>" */
} Special;

#define FIXP(v) (1 & (uintptr_t)(v))
#define MKFIX(n) ((V)(((uintptr_t)(intptr_t)(n) << 1) | 1))
#define FIXV(v) ((intptr_t)(uintptr_t)(v) >> 1)

/* The interpreter's roots: globals, so both collectors see them. */
static V nil, t_true, t_false, unspec, unbound;
static V symtab; /* an array of kBuckets lists of symbols (no type word: only intern reads it) */
static V s_quote, s_if, s_define, s_set, s_lambda, s_let, s_begin, s_cond, s_and, s_or, s_else;

static uint64_t out_hash; /* what display printed, and each round's result */

static void die(const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    fprintf(stderr, "gc_interp: ");
    vfprintf(stderr, fmt, ap);
    fprintf(stderr, "\n");
    va_end(ap);
    exit(1);
}

static int is(V v, uintptr_t t)
{
    return !FIXP(v) && v->type == t;
}

/* ------------------------------------------------------------ objects */

static V cons(V a, V d)
{
    Pair *p = gcw_malloc(sizeof *p);
    p->type = T_PAIR;
    STORE(p->car, a);
    STORE(p->cdr, d);
    return (V)p;
}

static V car(V p)
{
    if (!is(p, T_PAIR)) die("car of a non-pair");
    return ((Pair *)p)->car;
}

static V cdr(V p)
{
    if (!is(p, T_PAIR)) die("cdr of a non-pair");
    return ((Pair *)p)->cdr;
}

#define CADR(x) car(cdr(x))
#define CDDR(x) cdr(cdr(x))

static V make_string(const char *s, size_t n)
{
    String *str = gcw_malloc_atomic(sizeof *str + n + 1);
    str->type = T_STRING;
    str->len = n;
    memcpy(str->s, s, n);
    str->s[n] = 0;
    return (V)str;
}

static V special(const char *name)
{
    Special *s = gcw_malloc(sizeof *s);
    s->type = T_SPECIAL;
    s->name = name;
    return (V)s;
}

static uint64_t hash_bytes(const char *s, size_t n)
{
    uint64_t h = 1469598103934665603ull;
    for (size_t i = 0; i < n; i++) h = (h ^ (unsigned char)s[i]) * 1099511628211ull;
    return h;
}

static V intern(const char *name, size_t n)
{
    V *buckets = (V *)symtab;
    size_t b = hash_bytes(name, n) % kBuckets;
    for (V l = buckets[b]; l != nil; l = cdr(l)) {
        String *s = (String *)((Symbol *)car(l))->name;
        if (s->len == n && !memcmp(s->s, name, n)) return car(l);
    }
    V str = make_string(name, n);
    Symbol *sym = gcw_malloc(sizeof *sym);
    sym->type = T_SYMBOL;
    STORE(sym->name, str);
    STORE(sym->value, unbound);
    STORE(buckets[b], cons((V)sym, buckets[b]));
    return (V)sym;
}

static V sym(const char *name)
{
    return intern(name, strlen(name));
}

static V list_of(int n, V *items)
{
    V l = nil;
    while (n > 0) l = cons(items[--n], l);
    return l;
}

/* ------------------------------------------------------------ reader */

typedef struct {
    const char *p;
} Reader;

static void skip_space(Reader *r)
{
    for (;;) {
        while (*r->p == ' ' || *r->p == '\n' || *r->p == '\t') r->p++;
        if (*r->p != ';') return;
        while (*r->p && *r->p != '\n') r->p++;
    }
}

static int delimiter(char c)
{
    return !c || c == ' ' || c == '\n' || c == '\t' || c == '(' || c == ')' || c == ';' || c == '"';
}

static V read_expr(Reader *r);

static V read_list(Reader *r)
{
    V head = nil, last = nil;
    for (;;) {
        skip_space(r);
        if (!*r->p) die("the program ends inside a list");
        if (*r->p == ')') {
            r->p++;
            return head;
        }
        V cell = cons(read_expr(r), nil);
        if (last == nil)
            head = cell;
        else
            STORE(((Pair *)last)->cdr, cell);
        last = cell;
    }
}

static V read_expr(Reader *r)
{
    skip_space(r);
    char c = *r->p;
    if (!c) return NULL;
    if (c == '(') {
        r->p++;
        return read_list(r);
    }
    if (c == ')') die("an unexpected )");
    if (c == '\'') {
        r->p++;
        V items[2] = {s_quote, read_expr(r)};
        return list_of(2, items);
    }
    if (c == '"') {
        const char *start = ++r->p;
        while (*r->p && *r->p != '"') r->p++;
        if (!*r->p) die("an unterminated string");
        return make_string(start, (size_t)(r->p++ - start));
    }
    const char *start = r->p;
    while (!delimiter(*r->p)) r->p++;
    size_t n = (size_t)(r->p - start);
    if (n == 2 && start[0] == '#') {
        if (start[1] == 't') return t_true;
        if (start[1] == 'f') return t_false;
    }
    size_t i = start[0] == '-' && n > 1;
    size_t digits = i;
    while (digits < n && start[digits] >= '0' && start[digits] <= '9') digits++;
    if (digits == n && n > i) {
        intptr_t v = 0;
        for (size_t k = i; k < n; k++) v = v * 10 + (start[k] - '0');
        return MKFIX(i ? -v : v);
    }
    return intern(start, n);
}

/* ------------------------------------------------------------ printer */

static void out(const char *s, size_t n)
{
    out_hash = gcw_mix(out_hash, hash_bytes(s, n));
}

static void print(V v, int quote_strings)
{
    char buf[32];
    if (FIXP(v)) {
        out(buf, (size_t)snprintf(buf, sizeof buf, "%ld", (long)FIXV(v)));
        return;
    }
    switch (v->type) {
    case T_PAIR:
        out("(", 1);
        for (;;) {
            print(car(v), quote_strings);
            v = cdr(v);
            if (v == nil) break;
            if (!is(v, T_PAIR)) {
                out(" . ", 3);
                print(v, quote_strings);
                break;
            }
            out(" ", 1);
        }
        out(")", 1);
        break;
    case T_SYMBOL: {
        String *s = (String *)((Symbol *)v)->name;
        out(s->s, s->len);
        break;
    }
    case T_STRING:
        if (quote_strings) out("\"", 1);
        out(((String *)v)->s, ((String *)v)->len);
        if (quote_strings) out("\"", 1);
        break;
    case T_CLOSURE:
        out("#<closure>", 10);
        break;
    case T_PRIM:
        out("#<primitive ", 12);
        out(((Prim *)v)->name, strlen(((Prim *)v)->name));
        out(">", 1);
        break;
    case T_SPECIAL:
        out(((Special *)v)->name, strlen(((Special *)v)->name));
        break;
    default:
        die("printing an object of type %lu", (unsigned long)v->type);
    }
}

/* ------------------------------------------------------------ evaluator */

static V make_frame(V vars, V vals, V parent)
{
    Frame *f = gcw_malloc(sizeof *f);
    f->type = T_FRAME;
    STORE(f->vars, vars);
    STORE(f->vals, vals);
    STORE(f->parent, parent);
    return (V)f;
}

/* The list cell holding a variable's value in env (nil: the global
 * environment), or NULL if it is global. */
static V *locate(V name, V env)
{
    for (; env != nil; env = ((Frame *)env)->parent) {
        Frame *f = (Frame *)env;
        for (V vars = f->vars, vals = f->vals; vars != nil;
             vars = ((Pair *)vars)->cdr, vals = ((Pair *)vals)->cdr)
            if (((Pair *)vars)->car == name) return &((Pair *)vals)->car;
    }
    return NULL;
}

static V lookup(V name, V env)
{
    V *slot = locate(name, env);
    V v = slot ? *slot : ((Symbol *)name)->value;
    if (v == unbound) {
        String *s = (String *)((Symbol *)name)->name;
        die("%s is unbound", s->s);
    }
    return v;
}

static V eval(V x, V env);

static V eval_list(V xs, V env)
{
    V head = nil, last = nil;
    for (; xs != nil; xs = cdr(xs)) {
        V cell = cons(eval(car(xs), env), nil);
        if (last == nil)
            head = cell;
        else
            STORE(((Pair *)last)->cdr, cell);
        last = cell;
    }
    return head;
}

/* Evaluates every expression of a body but the last, which it returns. */
static V eval_but_last(V body, V env)
{
    if (body == nil) return unspec;
    for (; cdr(body) != nil; body = cdr(body)) eval(car(body), env);
    return car(body);
}

static V define(V name, V value, V env)
{
    if (!is(name, T_SYMBOL)) die("define of a non-symbol");
    if (env == nil) {
        STORE(((Symbol *)name)->value, value);
    } else {
        Frame *f = (Frame *)env;
        STORE(f->vars, cons(name, f->vars));
        STORE(f->vals, cons(value, f->vals));
    }
    return name;
}

static V eval(V x, V env)
{
    for (;;) {
        if (FIXP(x)) return x;
        if (x->type == T_SYMBOL) return lookup(x, env);
        if (x->type != T_PAIR) return x;
        V op = car(x), args = cdr(x);
        if (op == s_quote) return car(args);
        if (op == s_if) {
            V rest = cdr(args);
            if (eval(car(args), env) != t_false) {
                x = car(rest);
            } else {
                if (cdr(rest) == nil) return unspec;
                x = CADR(rest);
            }
            continue;
        }
        if (op == s_define) {
            V target = car(args);
            if (is(target, T_PAIR)) { /* (define (f params...) body...) */
                Closure *c = gcw_malloc(sizeof *c);
                c->type = T_CLOSURE;
                STORE(c->params, cdr(target));
                STORE(c->body, cdr(args));
                STORE(c->env, env);
                return define(car(target), (V)c, env);
            }
            return define(target, eval(CADR(args), env), env);
        }
        if (op == s_set) {
            V name = car(args), value = eval(CADR(args), env);
            V *slot = locate(name, env);
            if (slot)
                STORE(*slot, value);
            else if (((Symbol *)name)->value == unbound)
                die("set! of an unbound variable");
            else
                STORE(((Symbol *)name)->value, value);
            return unspec;
        }
        if (op == s_lambda) {
            Closure *c = gcw_malloc(sizeof *c);
            c->type = T_CLOSURE;
            STORE(c->params, car(args));
            STORE(c->body, cdr(args));
            STORE(c->env, env);
            return (V)c;
        }
        if (op == s_let) {
            V vars = nil, vals = nil;
            for (V b = car(args); b != nil; b = cdr(b)) {
                vars = cons(car(car(b)), vars);
                vals = cons(eval(CADR(car(b)), env), vals);
            }
            env = make_frame(vars, vals, env);
            x = eval_but_last(cdr(args), env);
            continue;
        }
        if (op == s_begin) {
            x = eval_but_last(args, env);
            continue;
        }
        if (op == s_cond) {
            V clause = nil;
            for (V c = args; c != nil; c = cdr(c))
                if (car(car(c)) == s_else || eval(car(car(c)), env) != t_false) {
                    clause = car(c);
                    break;
                }
            if (clause == nil) return unspec;
            x = eval_but_last(cdr(clause), env);
            continue;
        }
        if (op == s_and || op == s_or) {
            if (args == nil) return op == s_and ? t_true : t_false;
            for (; cdr(args) != nil; args = cdr(args)) {
                V v = eval(car(args), env);
                if ((v == t_false) == (op == s_and)) return v;
            }
            x = car(args);
            continue;
        }
        V f = eval(op, env);
        V vals = eval_list(args, env);
        if (is(f, T_PRIM)) return ((Prim *)f)->fn(vals);
        if (!is(f, T_CLOSURE)) die("a call of a non-procedure");
        Closure *c = (Closure *)f;
        V p = c->params, a = vals;
        for (; p != nil && a != nil; p = cdr(p), a = cdr(a)) {
        }
        if (p != nil || a != nil) die("a call with the wrong number of arguments");
        env = make_frame(c->params, vals, c->env);
        x = eval_but_last(c->body, env);
    }
}

/* ------------------------------------------------------------ primitives */

static intptr_t num(V v)
{
    if (!FIXP(v)) die("a number expected");
    return FIXV(v);
}

/* A fixnum, if n fits in one. */
static V fix(intptr_t n, const char *op)
{
    if (n > INTPTR_MAX / 2 || n < INTPTR_MIN / 2) die("overflow in %s", op);
    return MKFIX(n);
}

static V boolean(int b)
{
    return b ? t_true : t_false;
}

static V arg(V args, int i)
{
    while (i--) args = cdr(args);
    return car(args);
}

static V p_add(V a)
{
    intptr_t s = 0;
    for (; a != nil; a = cdr(a))
        if (__builtin_add_overflow(s, num(car(a)), &s)) die("overflow in +");
    return fix(s, "+");
}

static V p_sub(V a)
{
    intptr_t s = num(car(a));
    if (cdr(a) == nil) return MKFIX(-s);
    for (a = cdr(a); a != nil; a = cdr(a))
        if (__builtin_sub_overflow(s, num(car(a)), &s)) die("overflow in -");
    return fix(s, "-");
}

static V p_mul(V a)
{
    intptr_t s = 1;
    for (; a != nil; a = cdr(a))
        if (__builtin_mul_overflow(s, num(car(a)), &s)) die("overflow in *");
    return fix(s, "*");
}

static V p_quotient(V a)
{
    intptr_t d = num(arg(a, 1));
    if (!d) die("division by zero");
    return MKFIX(num(arg(a, 0)) / d);
}

static V p_remainder(V a)
{
    intptr_t d = num(arg(a, 1));
    if (!d) die("division by zero");
    return MKFIX(num(arg(a, 0)) % d);
}

static V p_lt(V a)
{
    return boolean(num(arg(a, 0)) < num(arg(a, 1)));
}

static V p_le(V a)
{
    return boolean(num(arg(a, 0)) <= num(arg(a, 1)));
}

static V p_numeq(V a)
{
    return boolean(num(arg(a, 0)) == num(arg(a, 1)));
}

static V p_eq(V a)
{
    return boolean(arg(a, 0) == arg(a, 1));
}

static V p_not(V a)
{
    return boolean(arg(a, 0) == t_false);
}

static V p_nullp(V a)
{
    return boolean(arg(a, 0) == nil);
}

static V p_pairp(V a)
{
    return boolean(is(arg(a, 0), T_PAIR));
}

static V p_cons(V a)
{
    return cons(arg(a, 0), arg(a, 1));
}

static V p_car(V a)
{
    return car(arg(a, 0));
}

static V p_cdr(V a)
{
    return cdr(arg(a, 0));
}

static V p_list(V a)
{
    return a;
}

static V p_set_car(V a)
{
    V p = arg(a, 0);
    if (!is(p, T_PAIR)) die("set-car! of a non-pair");
    STORE(((Pair *)p)->car, arg(a, 1));
    return unspec;
}

static V p_set_cdr(V a)
{
    V p = arg(a, 0);
    if (!is(p, T_PAIR)) die("set-cdr! of a non-pair");
    STORE(((Pair *)p)->cdr, arg(a, 1));
    return unspec;
}

static String *str(V v)
{
    if (!is(v, T_STRING)) die("a string expected");
    return (String *)v;
}

static V p_string_append(V a)
{
    size_t n = 0;
    for (V l = a; l != nil; l = cdr(l)) n += str(car(l))->len;
    String *s = gcw_malloc_atomic(sizeof *s + n + 1);
    s->type = T_STRING;
    s->len = n;
    n = 0;
    for (V l = a; l != nil; l = cdr(l)) {
        memcpy(s->s + n, str(car(l))->s, str(car(l))->len);
        n += str(car(l))->len;
    }
    s->s[n] = 0;
    return (V)s;
}

static V p_number_to_string(V a)
{
    char buf[32];
    return make_string(buf, (size_t)snprintf(buf, sizeof buf, "%ld", (long)num(arg(a, 0))));
}

static V p_string_length(V a)
{
    return MKFIX(str(arg(a, 0))->len);
}

static V p_string_to_symbol(V a)
{
    String *s = str(arg(a, 0));
    return intern(s->s, s->len);
}

static V p_display(V a)
{
    print(arg(a, 0), 0);
    return unspec;
}

static void primitive(const char *name, V (*fn)(V))
{
    Prim *p = gcw_malloc(sizeof *p);
    p->type = T_PRIM;
    p->fn = fn;
    p->name = name;
    STORE(((Symbol *)sym(name))->value, (V)p);
}

/* ------------------------------------------------------------ the program */

static const char kProgram[] =
    "(define (fib n) (if (< n 2) n (+ (fib (- n 1)) (fib (- n 2)))))\n"
    "\n"
    "; an LCG (its state a global variable): 15 bits a call\n"
    "(define seed 1)\n"
    "(define (rand!)\n"
    "  (set! seed (remainder (+ (* seed 1103515245) 12345) 2147483648))\n"
    "  (quotient seed 65536))\n"
    "(define (random-list n acc)\n"
    "  (if (= n 0) acc (random-list (- n 1) (cons (remainder (rand!) 10000) acc))))\n"
    "\n"
    "(define (reverse-onto l acc) (if (null? l) acc (reverse-onto (cdr l) (cons (car l) acc))))\n"
    "(define (reverse l) (reverse-onto l '()))\n"
    "(define (len l n) (if (null? l) n (len (cdr l) (+ n 1))))\n"
    "(define (sum l acc) (if (null? l) acc (sum (cdr l) (+ acc (car l)))))\n"
    "(define (map f l)\n"
    "  (define (loop l acc) (if (null? l) (reverse acc) (loop (cdr l) (cons (f (car l)) acc))))\n"
    "  (loop l '()))\n"
    "(define (iota n)\n"
    "  (define (loop i acc) (if (< i 0) acc (loop (- i 1) (cons i acc))))\n"
    "  (loop (- n 1) '()))\n"
    "(define (take l n) (if (or (= n 0) (null? l)) '() (cons (car l) (take (cdr l) (- n 1)))))\n"
    "\n"
    "; merge sort\n"
    "(define (merge a b acc)\n"
    "  (cond ((null? a) (reverse-onto acc b))\n"
    "        ((null? b) (reverse-onto acc a))\n"
    "        ((< (car b) (car a)) (merge a (cdr b) (cons (car b) acc)))\n"
    "        (else (merge (cdr a) b (cons (car a) acc)))))\n"
    "(define (split l a b) (if (null? l) (cons a b) (split (cdr l) b (cons (car l) a))))\n"
    "(define (sort l)\n"
    "  (if (or (null? l) (null? (cdr l)))\n"
    "      l\n"
    "      (let ((halves (split l '() '())))\n"
    "        (merge (sort (car halves)) (sort (cdr halves)) '()))))\n"
    "(define (sorted? l)\n"
    "  (or (null? l) (null? (cdr l)) (and (<= (car l) (car (cdr l))) (sorted? (cdr l)))))\n"
    "\n"
    "; a symbol table: words made as strings, interned, counted in an association list\n"
    "(define (assq k al) (cond ((null? al) #f) ((eq? k (car (car al))) (car al)) (else (assq k "
    "(cdr al)))))\n"
    "(define (word k) (string->symbol (string-append \"w\" (number->string k))))\n"
    "(define (count-words n table)\n"
    "  (if (= n 0)\n"
    "      table\n"
    "      (let ((w (word (remainder (rand!) 100))))\n"
    "        (let ((entry (assq w table)))\n"
    "          (if entry\n"
    "              (begin (set-cdr! entry (+ (cdr entry) 1)) (count-words (- n 1) table))\n"
    "              (count-words (- n 1) (cons (cons w 1) table)))))))\n"
    "(define (total-count table acc)\n"
    "  (if (null? table) acc (total-count (cdr table) (+ acc (cdr (car table))))))\n"
    "\n"
    "; strings built up\n"
    "(define (join l sep)\n"
    "  (cond ((null? l) \"\")\n"
    "        ((null? (cdr l)) (number->string (car l)))\n"
    "        (else (string-append (number->string (car l)) sep (join (cdr l) sep)))))\n"
    "\n"
    "; closures\n"
    "(define (make-counter) (let ((n 0)) (lambda () (set! n (+ n 1)) n)))\n"
    "(define (count-up c k) (if (= k 0) (c) (begin (c) (count-up c (- k 1)))))\n"
    "\n"
    "; a long-lived table of 4000 entries (k . list): a tenth given new lists each round\n"
    "(define db (map (lambda (k) (cons k (iota 8))) (iota 4000)))\n"
    "(define (refresh! l i n)\n"
    "  (cond ((null? l) n)\n"
    "        ((= (remainder (+ (car (car l)) i) 10) 0)\n"
    "         (set-cdr! (car l) (list i (rand!) (rand!)))\n"
    "         (refresh! (cdr l) i (+ n 1)))\n"
    "        (else (refresh! (cdr l) i n))))\n"
    "\n"
    "(define recent '())\n"
    "(define (run i)\n"
    "  (set! seed (+ i 1))\n"
    "  (let ((l (random-list 400 '())))\n"
    "    (let ((s (sort l))\n"
    "          (table (count-words 200 '())))\n"
    "      (let ((r (list (fib 16) (sorted? s) (len s 0) (sum s 0) (= (sum s 0) (sum l 0))\n"
    "                     (total-count table 0) (len table 0)\n"
    "                     (string-length (join (map (lambda (x) (* x x)) (iota 60)) \",\"))\n"
    "                     (count-up (make-counter) 50) (refresh! db i 0) (car s)\n"
    "                     (car (reverse s)))))\n"
    "        (display (car table))\n"
    "        (set! recent (cons r (take recent 8)))\n"
    "        r))))\n";

/* ------------------------------------------------------------ checks */

static intptr_t c_fib(int n)
{
    return n < 2 ? n : c_fib(n - 1) + c_fib(n - 2);
}

/* The sum of run i's 400 random numbers, as the program makes them. */
static intptr_t c_random_sum(intptr_t i)
{
    intptr_t seed = i + 1, s = 0;
    for (int k = 0; k < 400; k++) {
        seed = (seed * 1103515245 + 12345) % 2147483648;
        s += (seed / 65536) % 10000;
    }
    return s;
}

static size_t c_joined_squares(void)
{
    size_t n = 0;
    char buf[32];
    for (int x = 0; x < 60; x++) n += (size_t)snprintf(buf, sizeof buf, "%d", x * x) + (x > 0);
    return n;
}

static void check_round(V r, intptr_t i)
{
    V want[10] = {MKFIX(c_fib(16)), t_true,     MKFIX(400), MKFIX(c_random_sum(i)),
                  t_true,           MKFIX(200), NULL,       MKFIX(c_joined_squares()),
                  MKFIX(51),        MKFIX(400)};
    for (int k = 0; k < 10; k++, r = cdr(r))
        if (want[k] && car(r) != want[k]) die("round %ld: result %d is wrong", (long)i, k);
}

int main(int argc, char **argv)
{
    double scale = gcw_scaled_args(argc, argv, "gc_interp");
    intptr_t rounds = (intptr_t)(kRounds * scale + 0.5);
    if (rounds < 1) rounds = 1;

    gcw_setup("gc_interp");
    gcw_start();
    nil = special("()");
    t_true = special("#t");
    t_false = special("#f");
    unspec = special("#<unspecified>");
    unbound = special("#<unbound>");
    symtab = gcw_malloc(kBuckets * sizeof(V));
    for (int b = 0; b < kBuckets; b++) STORE(((V *)symtab)[b], nil);
    s_quote = sym("quote");
    s_if = sym("if");
    s_define = sym("define");
    s_set = sym("set!");
    s_lambda = sym("lambda");
    s_let = sym("let");
    s_begin = sym("begin");
    s_cond = sym("cond");
    s_and = sym("and");
    s_or = sym("or");
    s_else = sym("else");
    primitive("+", p_add);
    primitive("-", p_sub);
    primitive("*", p_mul);
    primitive("quotient", p_quotient);
    primitive("remainder", p_remainder);
    primitive("<", p_lt);
    primitive("<=", p_le);
    primitive("=", p_numeq);
    primitive("eq?", p_eq);
    primitive("not", p_not);
    primitive("null?", p_nullp);
    primitive("pair?", p_pairp);
    primitive("cons", p_cons);
    primitive("car", p_car);
    primitive("cdr", p_cdr);
    primitive("list", p_list);
    primitive("set-car!", p_set_car);
    primitive("set-cdr!", p_set_cdr);
    primitive("string-append", p_string_append);
    primitive("number->string", p_number_to_string);
    primitive("string-length", p_string_length);
    primitive("string->symbol", p_string_to_symbol);
    primitive("display", p_display);

    Reader rd = {kProgram};
    for (V x; (x = read_expr(&rd));) eval(x, nil);
    V run = sym("run");
    for (intptr_t i = 0; i < rounds; i++) {
        V call[2] = {run, MKFIX(i)};
        V r = eval(list_of(2, call), nil);
        check_round(r, i);
        print(r, 1);
    }
    gcw_stop();

    print(((Symbol *)sym("recent"))->value, 1);
    print(((Symbol *)sym("db"))->value, 1);
    char extra[96];
    snprintf(extra, sizeof extra, "\"scale\": %g, \"checksum\": \"%016llx\", ", scale,
             (unsigned long long)out_hash);
    gcw_report(extra);
    return 0;
}
