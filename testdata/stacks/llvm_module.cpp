/*
 * A C++ program that allocates deep inside a large library (tests/stacks.rs, issue 32):
 * libLLVM, Debian's libllvmN that clang brings, some 110 MB with about a million unwind rows,
 * called through its C API (declared here, so that no LLVM headers are needed). Built -O2 -g
 * -fomit-frame-pointer against that library:
 *
 *   main -> make_module -> LLVMModuleCreateWithNameInContext -> llvm::Module::Module
 *        -> operator new(7002) (a std::string of the name, built inline)
 *
 * The module's name is 7001 characters, so each string the module keeps of it (its ModuleID
 * and its SourceFileName) allocates 7002 bytes: the fingerprint, twice.
 */
#include <cstring>

extern "C" {
typedef struct LLVMOpaqueContext *LLVMContextRef;
typedef struct LLVMOpaqueModule *LLVMModuleRef;
LLVMContextRef LLVMContextCreate(void);
void LLVMContextDispose(LLVMContextRef context);
LLVMModuleRef LLVMModuleCreateWithNameInContext(const char *name, LLVMContextRef context);
void LLVMDisposeModule(LLVMModuleRef module);
}

static volatile int stacks_sink;

/* Static, so that main makes no allocation of the fingerprint's size itself. */
static char module_name[7002];

__attribute__((noinline, noclone)) static LLVMModuleRef make_module(LLVMContextRef context)
{
	LLVMModuleRef module = LLVMModuleCreateWithNameInContext(module_name, context);

	stacks_sink++;
	return module;
}

int main()
{
	memset(module_name, 'm', sizeof(module_name) - 1);
	LLVMContextRef context = LLVMContextCreate();
	LLVMModuleRef module = make_module(context);

	LLVMDisposeModule(module);
	LLVMContextDispose(context);
	return 0;
}
