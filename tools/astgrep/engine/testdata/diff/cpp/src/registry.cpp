#include "registry.hpp"

#include <iostream>

namespace app {

Registry &Registry::instance()
{
    static Registry r;
    return r;
}

void Registry::add(std::unique_ptr<Plugin> plugin)
{
    std::lock_guard<std::mutex> lock(mu_);
    if (frozen_) {
        // Adding after start would race with the start loop.
        std::cerr << "registry frozen, dropping " << plugin->name() << std::endl;
        return;
    }
    plugins_[plugin->name()] = std::move(plugin);
}

Plugin *Registry::find(const std::string &name) const
{
    std::lock_guard<std::mutex> lock(mu_);
    auto it = plugins_.find(name);
    if (it == plugins_.end()) {
        return nullptr;
    }
    return it->second.get();
}

std::vector<std::string> Registry::names() const
{
    std::lock_guard<std::mutex> lock(mu_);
    std::vector<std::string> out;
    for (const auto &kv : plugins_) {
        out.push_back(kv.first);
    }
    return out;
}

} // namespace app
