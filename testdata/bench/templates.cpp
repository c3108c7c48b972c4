// The bench's C++ compile (issue 12): `g++ -O2 -c` of a file with templates and containers,
// so that cc1plus allocates as it does on real C++ code (about a second to compile here).
#include <algorithm>
#include <functional>
#include <map>
#include <memory>
#include <numeric>
#include <set>
#include <sstream>
#include <string>
#include <unordered_map>
#include <vector>

namespace bench {

template <class K, class V> class Index {
public:
	void add(const K &key, V value) { by_key_[key].push_back(std::move(value)); }

	template <class F> std::vector<V> select(F keep) const
	{
		std::vector<V> out;
		for (const auto &[key, values] : by_key_)
			std::copy_if(values.begin(), values.end(), std::back_inserter(out), keep);
		std::sort(out.begin(), out.end());
		return out;
	}

	std::size_t size() const
	{
		return std::accumulate(by_key_.begin(), by_key_.end(), std::size_t{0},
				       [](std::size_t n, const auto &kv) { return n + kv.second.size(); });
	}

private:
	std::map<K, std::vector<V>> by_key_;
};

struct Record {
	std::string name;
	int weight;
	bool operator<(const Record &o) const { return weight < o.weight || (weight == o.weight && name < o.name); }
};

template <class T> std::string describe(const T &values)
{
	std::ostringstream out;
	for (const auto &v : values)
		out << v << ',';
	return out.str();
}

std::string describe_records(const std::vector<Record> &records)
{
	std::ostringstream out;
	for (const auto &r : records)
		out << r.name << '=' << r.weight << ';';
	return out.str();
}

template <int N> struct Unrolled {
	static long sum(const std::vector<long> &v) { return (v.size() > N ? v[N] : 0) + Unrolled<N - 1>::sum(v); }
};
template <> struct Unrolled<0> {
	static long sum(const std::vector<long> &v) { return v.empty() ? 0 : v[0]; }
};

long run(int n)
{
	Index<std::string, Record> records;
	Index<int, long> numbers;
	Index<long, std::string> names;
	std::unordered_map<std::string, std::shared_ptr<Record>> shared;
	std::set<std::pair<int, std::string>> ordered;
	for (int i = 0; i < n; i++) {
		std::string key = "k" + std::to_string(i % 17);
		records.add(key, Record{key + std::to_string(i), i % 31});
		numbers.add(i % 13, long(i) * i);
		names.add(long(i % 7), key);
		shared.emplace(key, std::make_shared<Record>(Record{key, i}));
		ordered.emplace(i % 5, key);
	}
	auto heavy = records.select([](const Record &r) { return r.weight > 10; });
	auto big = numbers.select([](long v) { return v % 3 == 0; });
	auto some = names.select([](const std::string &s) { return s.size() > 2; });
	std::function<long(long)> twice = [](long v) { return 2 * v; };
	std::vector<long> doubled(big.size());
	std::transform(big.begin(), big.end(), doubled.begin(), twice);
	return long(describe_records(heavy).size() + describe(big).size() + describe(some).size()) +
	       Unrolled<24>::sum(doubled) + long(shared.size() + ordered.size() + records.size());
}

} // namespace bench
