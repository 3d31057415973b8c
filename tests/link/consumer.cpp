// The same program as C++17: the public headers must compile as C++ without warnings.
#include "consumer.c"
