#pragma once

#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

namespace app {

class Plugin {
public:
    virtual ~Plugin() = default;
    virtual std::string name() const = 0;
    virtual bool start() = 0;
    virtual void stop() {}
};

class Registry {
public:
    static Registry &instance();

    void add(std::unique_ptr<Plugin> plugin);
    Plugin *find(const std::string &name) const;
    std::vector<std::string> names() const;

private:
    Registry() = default;
    mutable std::mutex mu_;
    std::map<std::string, std::unique_ptr<Plugin>> plugins_;
    unsigned int started_ : 1;
    unsigned int frozen_ : 1;
};

} // namespace app
