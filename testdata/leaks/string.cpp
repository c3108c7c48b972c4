#include <string>
#include <cstdio>
int main(){ std::string s(100,120); puts(s.c_str()); }
